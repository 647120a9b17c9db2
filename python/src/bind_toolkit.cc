// Bindings of seed 001's toolkit core (src/rill/toolkit): MessageQueue,
// QueueStore and StreamAnalytics, the C++ state under rills.queue and
// rills.analytics. Message bodies cross as str; the Python classes decide what
// a body holds (JSON text when persisted, a handle to the object otherwise).
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bind_common.h"
#include "bind_toolkit.h"
#include "py_status.h"
#include "rill/toolkit/message_queue.h"
#include "rill/toolkit/queue_store.h"
#include "rill/toolkit/stream_analytics.h"
#include "rill/toolkit/toolkit.h"

namespace rills {
namespace {

namespace tk = rill::toolkit;

/// Owns a store (nanobind constructs objects in place).
struct PyQueueStore {
  std::shared_ptr<tk::QueueStore> store;
};

/// A queue plus the store it writes to, or the toolkit whose manager owns it
/// (kept alive as long as the queue).
struct PyMessageQueue {
  std::shared_ptr<tk::QueueStore> store;
  std::shared_ptr<tk::MessageQueue> queue;
  std::shared_ptr<tk::Toolkit> owner;
};

struct PyStreamAnalytics {
  std::unique_ptr<tk::StreamAnalytics> analytics;
};

nb::object Optional(const std::optional<double>& v) {
  return v.has_value() ? nb::cast(*v) : nb::none();
}

nb::dict QueueStatsToDict(const tk::QueueStats& s) {
  nb::dict d;
  s.ForEachField([&](const char* name, const auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::optional<double>>) {
      d[name] = Optional(value);
    } else {
      d[name] = value;
    }
  });
  return d;
}

nb::dict MetricToDict(const tk::MetricSnapshot& s) {
  nb::dict d;
  d["name"] = s.name;
  d["count"] = s.count;
  d["sum"] = s.sum;
  d["avg"] = s.avg;
  d["min"] = Optional(s.min);
  d["max"] = Optional(s.max);
  d["last"] = Optional(s.last);
  d["first_timestamp"] = Optional(s.first_timestamp);
  d["last_timestamp"] = Optional(s.last_timestamp);
  d["rate_per_second"] = s.rate_per_second;
  return d;
}

void BindQueue(nb::module_& m) {
  nb::class_<PyQueueStore>(m, "QueueStore")
      .def("__init__",
           [](PyQueueStore* self, const std::string& path) {
             std::shared_ptr<tk::QueueStore> store = ValueOrRaise(tk::QueueStore::Open(path));
             new (self) PyQueueStore{std::move(store)};
           },
           nb::arg("path"))
      .def("register",
           [](PyQueueStore& s, const std::string& queue, int64_t max_size) {
             ThrowIfError(s.store->Register(queue, max_size));
           })
      .def("unregister",
           [](PyQueueStore& s, const std::string& queue) {
             ThrowIfError(s.store->Unregister(queue));
           })
      .def("queues", [](PyQueueStore& s) { return ValueOrRaise(s.store->Queues()); })
      .def("load",
           [](PyQueueStore& s, const std::string& queue) {
             std::vector<std::tuple<int64_t, int64_t, int64_t, std::string>> out;
             for (auto& m : ValueOrRaise(s.store->Load(queue))) {
               out.emplace_back(m.id, m.priority, m.seq, std::move(m.body));
             }
             return out;
           })
      .def("close", [](PyQueueStore& s) { s.store.reset(); })
      .def_prop_ro("path", [](PyQueueStore& s) { return s.store ? s.store->path() : ""; });

  nb::class_<PyMessageQueue>(m, "MessageQueue")
      .def("__init__",
           [](PyMessageQueue* self, const std::string& name, int64_t max_size,
              const std::string& on_overflow, PyQueueStore* store) {
             tk::QueueOptions options;
             options.name = name;
             options.max_size = max_size;
             options.on_overflow = ValueOrRaise(tk::ParseQueueOverflow(on_overflow));
             std::shared_ptr<tk::QueueStore> kept;
             if (store != nullptr) {
               if (!store->store) Raise(PyExc_ValueError, "the QueueStore is closed");
               kept = store->store;
             }
             auto queue = ValueOrRaise(tk::MessageQueue::Make(options, kept.get()));
             new (self) PyMessageQueue{std::move(kept), std::move(queue)};
           },
           nb::arg("name"), nb::arg("max_size"), nb::arg("on_overflow"),
           nb::arg("store").none())
      .def("enqueue_batch",
           [](PyMessageQueue& q, std::vector<std::string> bodies,
              std::optional<int64_t> priority) {
             std::vector<std::string> dropped;
             auto n = q.queue->EnqueueBatch(std::move(bodies), priority, &dropped);
             return std::make_pair(ValueOrRaise(std::move(n)), std::move(dropped));
           },
           nb::arg("bodies"), nb::arg("priority").none())
      .def("enqueue",
           [](PyMessageQueue& q, std::string body, std::optional<int64_t> priority) {
             std::vector<std::string> one, dropped;
             one.push_back(std::move(body));
             auto n = q.queue->EnqueueBatch(std::move(one), priority, &dropped);
             return std::make_pair(ValueOrRaise(std::move(n)) == 1, std::move(dropped));
           },
           nb::arg("body"), nb::arg("priority").none())
      .def("dequeue", [](PyMessageQueue& q) { return ValueOrRaise(q.queue->Dequeue()); })
      .def("dequeue_batch",
           [](PyMessageQueue& q, int64_t n) { return ValueOrRaise(q.queue->DequeueBatch(n)); })
      .def("peek", [](PyMessageQueue& q) { return q.queue->Peek(); })
      .def("clear", [](PyMessageQueue& q) { return ValueOrRaise(q.queue->Clear()); })
      .def("size", [](PyMessageQueue& q) { return q.queue->size(); })
      .def("stats", [](PyMessageQueue& q) { return QueueStatsToDict(q.queue->stats()); });
}

void BindSharedToolkit(nb::module_& m) {
  nb::class_<PyToolkit>(m, "Toolkit")
      .def("__init__",
           [](PyToolkit* self, const std::string& queue_db) {
             tk::ToolkitOptions options;
             options.queue_db = queue_db;
             new (self) PyToolkit{ValueOrRaise(tk::Toolkit::Make(std::move(options)))};
           },
           nb::arg("queue_db") = "")
      .def("create_queue",
           [](PyToolkit& t, const std::string& name, int64_t max_size,
              const std::string& on_overflow) {
             tk::QueueOptions options;
             options.name = name;
             options.max_size = max_size;
             options.on_overflow = ValueOrRaise(tk::ParseQueueOverflow(on_overflow));
             auto queue = ValueOrRaise(t.toolkit->queues->CreateQueue(std::move(options)));
             return PyMessageQueue{nullptr, std::move(queue), t.toolkit};
           },
           nb::arg("name"), nb::arg("max_size"), nb::arg("on_overflow"))
      .def("get_queue",
           [](PyToolkit& t, const std::string& name) -> std::optional<PyMessageQueue> {
             auto queue = t.toolkit->queues->GetQueue(name);
             if (!queue.ok()) return std::nullopt;
             return PyMessageQueue{nullptr, std::move(*queue), t.toolkit};
           })
      .def("delete_queue",
           [](PyToolkit& t, const std::string& name) {
             auto status = t.toolkit->queues->DeleteQueue(name);
             if (status.IsKeyError()) return false;
             ThrowIfError(status);
             return true;
           })
      .def("list_queues", [](PyToolkit& t) { return t.toolkit->queues->ListQueues(); })
      .def_prop_ro("persistent", [](PyToolkit& t) { return t.toolkit->queues->persistent(); });
}

void BindAnalytics(nb::module_& m) {
  nb::class_<PyStreamAnalytics>(m, "StreamAnalytics")
      .def("__init__",
           [](PyStreamAnalytics* self, double rate_window, nb::object clock) {
             tk::StreamAnalyticsOptions options;
             options.rate_window_seconds = rate_window;
             if (!clock.is_none()) {
               // Called with the GIL held: the methods below never release it.
               options.clock = [clock]() { return nb::cast<double>(clock()); };
             }
             new (self) PyStreamAnalytics{ValueOrRaise(tk::StreamAnalytics::Make(options))};
           },
           nb::arg("rate_window"), nb::arg("clock").none())
      .def("track",
           [](PyStreamAnalytics& a, const std::string& name, double value,
              std::optional<double> ts) { ThrowIfError(a.analytics->Track(name, value, ts)); },
           nb::arg("name"), nb::arg("value"), nb::arg("timestamp").none())
      .def("get",
           [](PyStreamAnalytics& a, const std::string& name) -> nb::object {
             auto s = a.analytics->Get(name);
             return s.has_value() ? nb::object(MetricToDict(*s)) : nb::none();
           })
      .def("all",
           [](PyStreamAnalytics& a) {
             nb::dict out;
             for (const auto& s : a.analytics->All()) out[s.name.c_str()] = MetricToDict(s);
             return out;
           })
      .def("reset", [](PyStreamAnalytics& a, const std::string& name) {
        return a.analytics->Reset(name);
      });
}

}  // namespace

void BindToolkit(nb::module_& m) {
  BindQueue(m);
  BindSharedToolkit(m);
  BindAnalytics(m);
}

}  // namespace rills
