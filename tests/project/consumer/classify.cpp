// classify.cpp MODEL_DIR < texts: a finetuned classifier on each line ("text" or "text ||| pair").
#include <bertrain/bertrain.h>
#include <iostream>
int main(int, char** argv) {
  const auto classify = bertrain::tasks::TextClassificationPipeline::load(argv[1]);
  std::cout.precision(9);
  for (std::string line; std::getline(std::cin, line);) {
    const size_t bar = line.rfind(" ||| ");
    const auto r = bar == std::string::npos ? classify(line) : classify(line.substr(0, bar), line.substr(bar + 5));
    std::cout << r.label;
    for (float p : r.scores) std::cout << '\t' << p;
    std::cout << '\n';
  }
}
