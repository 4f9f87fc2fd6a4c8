// TEMPORARY STUB (not committed): the exports helper writes the real one.
#include "planner/export.hpp"
namespace bmpipe {
std::string export_mindformers(const ExportLayout&, std::vector<std::string>* notes) {
  if (notes) notes->push_back("stub");
  return "stub\n";
}
MegatronExport export_megatron(const ExportLayout& l) {
  return MegatronExport{true, "", l, "stub\n"};
}
}  // namespace bmpipe
