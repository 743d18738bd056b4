// answer.cpp MODEL_DIR < "question<TAB>context" lines: the answer span a question-answering model finds.
#include <bertrain/bertrain.h>
#include <iostream>
int main(int, char** argv) {
  const auto qa = bertrain::tasks::QuestionAnsweringPipeline::load(argv[1]);
  for (std::string line; std::getline(std::cin, line);) {
    const size_t tab = line.find('\t');
    const auto a = qa(line.substr(0, tab), line.substr(tab + 1));
    std::cout << a.answer << '\t' << a.score << '\t' << a.start << '\t' << a.end << '\n';
  }
}
