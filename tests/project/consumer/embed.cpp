// embed.cpp MODEL_DIR < texts: one mean-pooled vector per line (sentence embeddings).
#include <bertrain/bertrain.h>
#include <iostream>
int main(int, char** argv) {
  const auto embed = bertrain::tasks::FeatureExtractionPipeline::load(argv[1]);
  std::cout.precision(9);
  for (std::string line; std::getline(std::cin, line);) {
    for (float v : embed(line)) std::cout << v << ' ';
    std::cout << '\n';
  }
}
