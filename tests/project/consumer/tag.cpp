// tag.cpp MODEL_DIR < texts: the entities a token classifier finds in each line, with character offsets.
#include <bertrain/bertrain.h>
#include <iostream>
int main(int, char** argv) {
  const auto tag = bertrain::tasks::TokenClassificationPipeline::load(argv[1]);
  for (std::string line; std::getline(std::cin, line);) {
    for (const auto& e : tag(line).entities)
      std::cout << e.entity_group << ' ' << e.start << ' ' << e.end << ' ' << e.word << '\t';
    std::cout << '\n';
  }
}
