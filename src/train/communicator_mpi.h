// communicator_mpi.h: the MPI communicator's entry points, for communicator.cpp only (MPI builds).
#pragma once

#include <memory>

#include "bertrain/train/communicator.h"

namespace bertrain::detail {

/// MPI_Init_thread(SERIALIZED) and a communicator over MPI_COMM_WORLD whose waits give up after
/// `timeout_seconds` (0: never). Throws bertrain::Error when MPI cannot start.
std::shared_ptr<Communicator> make_mpi_world(int* argc, char*** argv, double timeout_seconds);
/// MPI_Finalize if MPI was initialised and not yet finalised.
void finalize_mpi();

}  // namespace bertrain::detail
