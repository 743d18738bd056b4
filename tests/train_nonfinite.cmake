# NaN / Inf injected into inputs, weights and gradients, f32 and bf16: TrainStep skips, counts, changes nothing.
bertrain_add_test(train_nonfinite_test SOURCES train_nonfinite_test.cpp)
