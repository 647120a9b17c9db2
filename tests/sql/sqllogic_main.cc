// rill_sqllogic: run one tests/sql/*.test file (ctest runs each as a test).
//
//   rill_sqllogic FILE              pass when every record of FILE holds
//   rill_sqllogic --must-fail FILE  pass when FILE fails with the message its
//                                   first line names: "# must fail with: <text>"
//                                   (proves the runner catches wrong expectations)
#include <fstream>
#include <iostream>
#include <string>

#include "sqllogic.h"

int main(int argc, char** argv) {
  const bool must_fail = argc == 3 && std::string(argv[1]) == "--must-fail";
  if (argc != 2 && !must_fail) {
    std::cerr << "usage: rill_sqllogic [--must-fail] FILE.test\n";
    return 2;
  }
  const std::string path = argv[argc - 1];
  const rill::Status st = rill::sqllogic::RunFile(path);
  if (!must_fail) {
    if (!st.ok()) {
      std::cerr << st.message() << "\n";
      return 1;
    }
    std::cout << path << ": ok\n";
    return 0;
  }
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  const std::string prefix = "# must fail with: ";
  if (first.rfind(prefix, 0) != 0) {
    std::cerr << path << ": the first line must be '" << prefix << "<text>'\n";
    return 2;
  }
  const std::string want = first.substr(prefix.size());
  if (st.ok()) {
    std::cerr << path << ": passed, but must fail with '" << want << "'\n";
    return 1;
  }
  if (st.message().find(want) == std::string::npos) {
    std::cerr << path << ": failed, but not with '" << want << "':\n" << st.message() << "\n";
    return 1;
  }
  std::cout << path << ": fails as it must:\n" << st.message() << "\n";
  return 0;
}
