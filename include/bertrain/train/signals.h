// signals.h: SIGINT/SIGTERM become a flag the trainer polls between micro-batches, so it can save a
// checkpoint and exit cleanly instead of dying mid-write.
#pragma once

namespace bertrain {

/// The signal received since the guard was installed (SIGINT or SIGTERM), or 0.
int signal_received();

/// Installs the handlers for its lifetime and restores the previous ones afterwards.
class SignalGuard {
 public:
  SignalGuard();
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
};

}  // namespace bertrain
