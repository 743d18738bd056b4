bertrain_add_layer(core
  SOURCES core/error.cpp core/shape.cpp core/tensor.cpp core/allocator.cpp core/rng.cpp core/threads.cpp core/sha256.cpp core/crc32c.cpp
          core/json_limits.cpp core/cpu_peak.cpp
  PRIVATE_DEPS OpenMP::OpenMP_CXX)
