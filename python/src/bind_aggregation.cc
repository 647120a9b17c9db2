// Bindings of rill::toolkit::GroupAggregator: the built-in aggregates of
// rills.aggregation.AggregationPipeline.process_batch over Arrow data.
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bind_common.h"
#include "py_arrow.h"
#include "py_status.h"
#include "rill/toolkit/group_aggregator.h"

namespace rills {
namespace {

namespace tk = rill::toolkit;

struct PyGroupAggregator {
  std::unique_ptr<tk::GroupAggregator> agg;
};

}  // namespace

void BindAggregation(nb::module_& m) {
  nb::class_<PyGroupAggregator>(m, "GroupAggregator")
      .def("__init__",
           [](PyGroupAggregator* self, std::vector<std::string> group_by,
              const std::vector<std::tuple<std::string, std::string, std::string>>& specs) {
             std::vector<tk::GroupAggSpec> aggs;
             for (const auto& [output, fn, column] : specs) {
               aggs.push_back(tk::GroupAggSpec{output, ValueOrRaise(tk::ParseGroupAggFn(fn, column)),
                                               column});
             }
             new (self) PyGroupAggregator{
                 ValueOrRaise(tk::GroupAggregator::Make(std::move(group_by), std::move(aggs)))};
           },
           nb::arg("group_by"), nb::arg("aggregations"))
      .def("consume",
           [](PyGroupAggregator& self, nb::handle data) {
             auto imported = ValueOrRaise(ImportBatches(data));
             rill::Status st;
             {
               nb::gil_scoped_release release;
               for (const auto& batch : imported.batches) {
                 st = self.agg->Consume(*batch);
                 if (!st.ok()) break;
               }
             }
             ThrowIfError(st);
           })
      .def("finish",
           [](PyGroupAggregator& self) { return ExportTable(ValueOrRaise(self.agg->Finish())); })
      .def("reset", [](PyGroupAggregator& self) { self.agg->Reset(); })
      .def_prop_ro("groups", [](PyGroupAggregator& self) { return self.agg->groups(); })
      .def_prop_ro("rows", [](PyGroupAggregator& self) { return self.agg->rows(); });
}

}  // namespace rills
