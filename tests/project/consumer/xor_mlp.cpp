// xor_mlp.cpp: trains a 2-layer MLP on XOR with bertrain's public API only, and prints its accuracy.
#include <bertrain/core/rng.h>
#include <bertrain/nn/layers.h>
#include <bertrain/ops/ops.h>

#include <cstdio>
#include <memory>

using namespace bertrain;

struct Mlp : Module {
  explicit Mlp(Rng& rng) {
    fc1 = register_module("fc1", std::make_shared<Linear>(2, 8, true, 1.0, rng));
    fc2 = register_module("fc2", std::make_shared<Linear>(8, 2, true, 1.0, rng));
  }
  Variable forward(const Variable& x) const { return fc2->forward(bertrain::tanh(fc1->forward(x))); }
  std::shared_ptr<Linear> fc1, fc2;
};

int main() {
  Rng rng(2024);
  Mlp net(rng);
  Variable x(Tensor::from_vector({0, 0, 0, 1, 1, 0, 1, 1}, {4, 2}));
  Tensor y = Tensor::from_vector({0, 1, 1, 0}, {4}, DType::i32);
  double loss_value = 0;
  for (int step = 0; step < 2000; ++step) {
    net.zero_grad();
    Variable loss = cross_entropy(net.forward(x), y, Tensor(), 4.0);
    loss.backward();
    sgd_step(net.parameters(), 0.5);
    loss_value = loss.item();
  }
  Tensor logits = net.forward(x).value();
  int correct = 0;
  for (int i = 0; i < 4; ++i) correct += (logits.get(2 * i + 1) > logits.get(2 * i)) == (y.get(i) == 1);
  std::printf("loss %.6f accuracy %d%%\n", loss_value, correct * 25);
  return correct == 4 ? 0 : 1;
}
