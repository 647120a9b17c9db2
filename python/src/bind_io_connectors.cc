// Bindings of the connectors that decode real inputs: JSONStreamConnector (and
// the file / Kafka connectors when built). Their Python classes live in
// rills/_io_connectors.py.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind_common.h"
#include "py_arrow.h"
#include "py_status.h"
#include "rill/connector/bounded_buffer.h"
#include "rill/connector/file_stream_connector.h"
#include "rill/connector/kafka_connector.h"
#include "rill/connector/postgres_cdc_connector.h"
#include "rill/connector/json_stream_connector.h"
#include "rill/connector/websocket_connector.h"

namespace rills {

namespace {

rill::UnknownFieldPolicy ParseUnknownFields(const std::string& text) {
  if (text == "ignore") return rill::UnknownFieldPolicy::kIgnore;
  if (text == "error") return rill::UnknownFieldPolicy::kReject;
  throw nb::value_error(("unexpected_field_behavior must be 'ignore' or 'error', got '" + text +
                         "'")
                            .c_str());
}

/// A read-only view of `data` (bytes, bytearray, memoryview, str) that stays
/// valid while `data` is referenced; str is taken as UTF-8.
class BytesView {
 public:
  explicit BytesView(nb::handle data) {
    if (PyUnicode_Check(data.ptr())) {
      Py_ssize_t size = 0;
      const char* utf8 = PyUnicode_AsUTF8AndSize(data.ptr(), &size);
      if (!utf8) throw nb::python_error();
      view_ = std::string_view(utf8, static_cast<size_t>(size));
      return;
    }
    if (PyObject_GetBuffer(data.ptr(), &buffer_, PyBUF_SIMPLE) != 0) {
      PyErr_Clear();
      throw nb::type_error(("push_bytes() takes bytes, bytearray, memoryview or str, got " +
                            std::string(Py_TYPE(data.ptr())->tp_name))
                               .c_str());
    }
    has_buffer_ = true;
    view_ = std::string_view(static_cast<const char*>(buffer_.buf),
                             static_cast<size_t>(buffer_.len));
  }
  ~BytesView() {
    if (has_buffer_) PyBuffer_Release(&buffer_);
  }
  BytesView(const BytesView&) = delete;
  BytesView& operator=(const BytesView&) = delete;
  std::string_view view() const { return view_; }

 private:
  Py_buffer buffer_{};
  bool has_buffer_ = false;
  std::string_view view_;
};

nb::list RejectsToList(std::vector<rill::RejectedRecord> rejects) {
  nb::list out;
  for (const auto& r : rejects) {
    nb::dict d;
    d["connector"] = r.connector;
    d["position"] = r.position;
    d["error"] = r.error;
    d["raw"] = nb::bytes(r.raw.data(), r.raw.size());
    d["raw_size"] = r.raw_size;
    out.append(d);
  }
  return out;
}

template <typename C>
nb::object PollToStream(C& c) {
  rill::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> result;
  {
    nb::gil_scoped_release release;
    result = c.Poll();
  }
  auto batches = ValueOrRaise(std::move(result));
  if (batches.empty()) return nb::none();
  auto schema = batches.front()->schema();
  return ExportBatches(std::move(batches), schema);
}

rill::BufferLimits MakeLimits(int64_t max_records, int64_t max_bytes,
                              const std::string& on_overflow) {
  rill::BufferLimits limits;
  limits.max_records = max_records;
  limits.max_bytes = max_bytes;
  limits.on_overflow = ValueOrRaise(rill::ParseOverflowPolicy(on_overflow));
  return limits;
}

nb::dict TopicPartitionMap(const std::map<rill::KafkaConnector::TopicPartition, int64_t>& in) {
  nb::dict out;
  for (const auto& [tp, v] : in) out[nb::make_tuple(tp.first, tp.second)] = v;
  return out;
}

/// The connectors' row-operation options: format ("json" | "debezium"),
/// op_column and ts_ms_column ("" : none).
void SetRowOps(rill::JsonDecodeOptions* decode, const std::string& format,
               const std::string& op_column, const std::string& ts_ms_column) {
  decode->format = ValueOrRaise(rill::ParseJsonFormat(format));
  decode->op_column = op_column;
  decode->ts_ms_column = ts_ms_column;
}

template <typename F>
void Released(F&& f) {
  arrow::Status st;
  {
    nb::gil_scoped_release release;
    st = f();
  }
  ThrowIfError(st);
}

void BindKafka(nb::module_& m) {
  nb::class_<rill::KafkaConnector, rill::Connector>(m, "KafkaConnector")
      .def_static(
          "make",
          [](const std::string& target_table, const std::vector<std::string>& topics,
             const std::map<std::string, std::string>& config, const std::string& start,
             int64_t start_timestamp_ms, bool metadata_columns, nb::handle schema,
             const std::string& unknown, int64_t max_records, int64_t max_bytes,
             const std::string& on_overflow, const std::string& name, const std::string& format,
             const std::string& op_column, const std::string& ts_ms_column,
             const std::vector<std::string>& key_columns, const std::string& key_format,
             const std::string& value_format, const std::string& schema_registry_url,
             const std::string& schema_registry_user, const std::string& schema_registry_password,
             const std::string& avro_schema) {
            rill::KafkaOptions o;
            o.format = value_format;
            o.avro.schema_registry_url = schema_registry_url;
            o.avro.schema_registry_user = schema_registry_user;
            o.avro.schema_registry_password = schema_registry_password;
            o.avro.avro_schema = avro_schema;
            SetRowOps(&o.decode, format, op_column, ts_ms_column);
            o.key_columns = key_columns;
            o.key_format = ValueOrRaise(rill::ParseKafkaKeyFormat(key_format));
            o.topics = topics;
            o.config = config;
            o.start = ValueOrRaise(rill::ParseKafkaStart(start));
            o.start_timestamp_ms = start_timestamp_ms;
            o.metadata_columns = metadata_columns;
            if (!schema.is_none()) o.decode.schema = ValueOrRaise(ImportSchema(schema));
            o.decode.unknown_fields = ParseUnknownFields(unknown);
            o.limits = MakeLimits(max_records, max_bytes, on_overflow);
            o.name = name;
            return ValueOrRaise(rill::KafkaConnector::Make(target_table, o));
          },
          nb::arg("target_table"), nb::arg("topics"), nb::arg("config"), nb::arg("start"),
          nb::arg("start_timestamp_ms"), nb::arg("metadata_columns"), nb::arg("schema").none(),
          nb::arg("unexpected_fields"), nb::arg("max_records"), nb::arg("max_bytes"),
          nb::arg("on_overflow"), nb::arg("name"), nb::arg("format") = "json",
          nb::arg("op_column") = "", nb::arg("ts_ms_column") = "",
          nb::arg("key_columns") = std::vector<std::string>{}, nb::arg("key_format") = "json",
          nb::arg("value_format") = "json", nb::arg("schema_registry_url") = "",
          nb::arg("schema_registry_user") = "", nb::arg("schema_registry_password") = "",
          nb::arg("avro_schema") = "")
      .def("start", [](rill::KafkaConnector& c) { Released([&] { return c.Start(); }); })
      .def("stop",
           [](rill::KafkaConnector& c) {
             nb::gil_scoped_release release;
             c.Stop();
           })
      .def("poll", [](rill::KafkaConnector& c) { return PollToStream(c); })
      .def("take_rejects",
           [](rill::KafkaConnector& c) { return RejectsToList(c.TakeRejects()); })
      .def("positions", [](const rill::KafkaConnector& c) { return TopicPartitionMap(c.positions()); })
      .def("lags", [](const rill::KafkaConnector& c) { return TopicPartitionMap(c.lags()); });

  nb::class_<rill::KafkaMockCluster>(m, "KafkaMockCluster")
      .def_static("make",
                  [](int brokers) { return ValueOrRaise(rill::KafkaMockCluster::Make(brokers)); },
                  nb::arg("brokers") = 1)
      .def_prop_ro("bootstrap_servers", &rill::KafkaMockCluster::bootstrap_servers)
      .def("create_topic",
           [](rill::KafkaMockCluster& k, const std::string& topic, int partitions) {
             Released([&] { return k.CreateTopic(topic, partitions); });
           })
      .def(
          "produce",
          [](rill::KafkaMockCluster& k, const std::string& topic, nb::handle value,
             int32_t partition, nb::handle key, int64_t timestamp_ms) {
            BytesView v(value);
            std::string key_bytes;
            if (!key.is_none()) key_bytes = std::string(BytesView(key).view());
            Released([&] {
              return k.Produce(topic, partition, v.view(), key_bytes, timestamp_ms);
            });
          },
          nb::arg("topic"), nb::arg("value"), nb::arg("partition") = -1,
          nb::arg("key").none() = nb::none(), nb::arg("timestamp_ms") = 0)
      .def("produce_many",
           [](rill::KafkaMockCluster& k, const std::string& topic,
              const std::vector<std::string>& values) {
             Released([&] { return k.ProduceMany(topic, values); });
           })
      .def("set_broker_down", [](rill::KafkaMockCluster& k, int broker, bool down) {
        Released([&] { return k.SetBrokerDown(broker, down); });
      });
}

void BindPostgresCDC(nb::module_& m) {
  nb::class_<rill::PostgresCDCConnector, rill::Connector>(m, "PostgresCDCConnector")
      .def_static(
          "make",
          [](const std::string& target_table, const std::string& dsn, const std::string& table,
             const std::string& slot_name, const std::string& publication, bool snapshot,
             const std::string& numeric_as, int64_t max_buffer_records,
             int64_t status_interval_ms, int64_t lag_alert_bytes, const std::string& name) {
            rill::PostgresCDCOptions o;
            o.dsn = dsn;
            o.table = table;
            o.slot_name = slot_name;
            o.publication = publication;
            o.snapshot = snapshot;
            o.numeric_as = numeric_as;
            if (max_buffer_records > 0) o.max_buffer_records = max_buffer_records;
            if (status_interval_ms > 0) o.status_interval_ms = status_interval_ms;
            o.lag_alert_bytes = lag_alert_bytes;
            o.name = name;
            return ValueOrRaise(rill::PostgresCDCConnector::Make(target_table, o));
          },
          nb::arg("target_table"), nb::arg("dsn"), nb::arg("table"), nb::arg("slot_name"),
          nb::arg("publication"), nb::arg("snapshot"), nb::arg("numeric_as"),
          nb::arg("max_buffer_records"), nb::arg("status_interval_ms"),
          nb::arg("lag_alert_bytes"), nb::arg("name"))
      .def("start", [](rill::PostgresCDCConnector& c) { Released([&] { return c.Start(); }); })
      .def("stop",
           [](rill::PostgresCDCConnector& c) {
             nb::gil_scoped_release release;
             c.Stop();
           })
      .def("poll", [](rill::PostgresCDCConnector& c) { return PollToStream(c); })
      .def("take_rejects",
           [](rill::PostgresCDCConnector& c) { return RejectsToList(c.TakeRejects()); })
      .def("save_position",
           [](const rill::PostgresCDCConnector& c) { return ValueOrRaise(c.SavePosition()); })
      .def_prop_ro("publication", &rill::PostgresCDCConnector::publication)
      .def_prop_ro("confirmed_lsn", &rill::PostgresCDCConnector::confirmed_lsn);
}

void BindWebSocket(nb::module_& m) {
  nb::class_<rill::WebSocketConnector, rill::Connector>(m, "WebSocketConnector")
      .def_static(
          "make",
          [](const std::string& target_table, const std::string& uri,
             const std::map<std::string, std::string>& headers, nb::handle schema,
             const std::string& unknown, double reconnect_initial, double reconnect_max,
             double connect_timeout, int64_t max_message_bytes, bool tls_verify,
             const std::string& ca_file, int64_t max_records, int64_t max_bytes,
             const std::string& on_overflow, const std::string& name, const std::string& format,
             const std::string& op_column, const std::string& ts_ms_column) {
            rill::WebSocketOptions o;
            SetRowOps(&o.decode, format, op_column, ts_ms_column);
            o.headers = headers;
            if (!schema.is_none()) o.decode.schema = ValueOrRaise(ImportSchema(schema));
            o.decode.unknown_fields = ParseUnknownFields(unknown);
            o.reconnect_initial_seconds = reconnect_initial;
            o.reconnect_max_seconds = reconnect_max;
            o.connect_timeout_seconds = connect_timeout;
            o.max_message_bytes = max_message_bytes;
            o.tls_verify = tls_verify;
            o.ca_file = ca_file;
            o.limits = MakeLimits(max_records, max_bytes, on_overflow);
            o.name = name;
            return ValueOrRaise(rill::WebSocketConnector::Make(target_table, uri, o));
          },
          nb::arg("target_table"), nb::arg("uri"), nb::arg("headers"), nb::arg("schema").none(),
          nb::arg("unexpected_fields"), nb::arg("reconnect_initial_seconds"),
          nb::arg("reconnect_max_seconds"), nb::arg("connect_timeout_seconds"),
          nb::arg("max_message_bytes"), nb::arg("tls_verify"), nb::arg("ca_file"),
          nb::arg("max_records"), nb::arg("max_bytes"), nb::arg("on_overflow"), nb::arg("name"),
          nb::arg("format") = "json", nb::arg("op_column") = "", nb::arg("ts_ms_column") = "")
      .def("start", [](rill::WebSocketConnector& c) { Released([&] { return c.Start(); }); })
      .def("stop",
           [](rill::WebSocketConnector& c) {
             nb::gil_scoped_release release;
             c.Stop();
           })
      .def("poll", [](rill::WebSocketConnector& c) { return PollToStream(c); })
      .def("take_rejects",
           [](rill::WebSocketConnector& c) { return RejectsToList(c.TakeRejects()); })
      .def_prop_ro("connected", &rill::WebSocketConnector::connected)
      .def_prop_ro("last_error", &rill::WebSocketConnector::last_error);
}

}  // namespace

void BindIoConnectors(nb::module_& m) {
  nb::class_<rill::JsonStreamConnector, rill::Connector>(m, "JsonStreamConnector")
      .def_static(
          "make",
          [](const std::string& target_table, nb::handle schema, const std::string& unknown,
             int64_t max_record_bytes, int64_t max_raw_bytes, int64_t max_records,
             int64_t max_bytes, const std::string& on_overflow, const std::string& name,
             const std::string& format, const std::string& op_column,
             const std::string& ts_ms_column) {
            rill::JsonStreamOptions options;
            SetRowOps(&options.decode, format, op_column, ts_ms_column);
            if (!schema.is_none()) options.decode.schema = ValueOrRaise(ImportSchema(schema));
            options.decode.unknown_fields = ParseUnknownFields(unknown);
            if (max_record_bytes > 0) options.decode.max_record_bytes = max_record_bytes;
            if (max_raw_bytes >= 0) options.decode.max_raw_bytes = max_raw_bytes;
            options.limits = MakeLimits(max_records, max_bytes, on_overflow);
            options.name = name;
            return ValueOrRaise(rill::JsonStreamConnector::Make(target_table, options));
          },
          nb::arg("target_table"), nb::arg("schema").none(), nb::arg("unexpected_fields"),
          nb::arg("max_record_bytes"), nb::arg("max_raw_bytes"), nb::arg("max_records"),
          nb::arg("max_bytes"), nb::arg("on_overflow"), nb::arg("name"), nb::arg("format") = "json",
          nb::arg("op_column") = "", nb::arg("ts_ms_column") = "")
      .def(
          "push_bytes",
          [](rill::JsonStreamConnector& c, nb::handle data) {
            BytesView bytes(data);
            arrow::Status status;
            {
              nb::gil_scoped_release release;
              status = c.PushBytes(bytes.view());
            }
            ThrowIfError(status);
          },
          nb::arg("data"))
      .def("poll", [](rill::JsonStreamConnector& c) { return PollToStream(c); })
      .def("take_rejects",
           [](rill::JsonStreamConnector& c) { return RejectsToList(c.TakeRejects()); })
      .def("decode_schema_capsule", [](const rill::JsonStreamConnector& c) -> nb::object {
        auto schema = c.decode_schema();
        if (!schema) return nb::none();
        return ExportSchema(*schema);
      });

  nb::class_<rill::FileStreamConnector, rill::Connector>(m, "FileStreamConnector")
      .def_static(
          "make",
          [](const std::string& target_table, const std::string& watch_path,
             const std::string& file_pattern, bool delete_after_process, bool tail,
             nb::handle schema, int64_t poll_interval_ms, int64_t stable_ms, bool use_inotify,
             const std::string& state_path, int64_t max_records, int64_t max_bytes,
             const std::string& on_overflow, const std::string& name, const std::string& format,
             const std::string& op_column, const std::string& ts_ms_column) {
            rill::FileStreamOptions o;
            SetRowOps(&o.decode, format, op_column, ts_ms_column);
            o.watch_path = watch_path;
            o.file_pattern = file_pattern;
            o.delete_after_process = delete_after_process;
            o.tail = tail;
            if (!schema.is_none()) o.decode.schema = ValueOrRaise(ImportSchema(schema));
            o.poll_interval_ms = poll_interval_ms;
            o.stable_ms = stable_ms;
            o.use_inotify = use_inotify;
            o.state_path = state_path;
            o.limits = MakeLimits(max_records, max_bytes, on_overflow);
            o.name = name;
            return ValueOrRaise(rill::FileStreamConnector::Make(target_table, o));
          },
          nb::arg("target_table"), nb::arg("watch_path"), nb::arg("file_pattern"),
          nb::arg("delete_after_process"), nb::arg("tail"), nb::arg("schema").none(),
          nb::arg("poll_interval_ms"), nb::arg("stable_ms"), nb::arg("use_inotify"),
          nb::arg("state_path"), nb::arg("max_records"), nb::arg("max_bytes"),
          nb::arg("on_overflow"), nb::arg("name"), nb::arg("format") = "json",
          nb::arg("op_column") = "", nb::arg("ts_ms_column") = "")
      .def("start",
           [](rill::FileStreamConnector& c) {
             arrow::Status st;
             {
               nb::gil_scoped_release release;
               st = c.Start();
             }
             ThrowIfError(st);
           })
      .def("stop",
           [](rill::FileStreamConnector& c) {
             nb::gil_scoped_release release;
             c.Stop();
           })
      .def(
          "scan_once",
          [](rill::FileStreamConnector& c, bool present_are_complete) {
            arrow::Status st;
            {
              nb::gil_scoped_release release;
              st = c.ScanOnce(present_are_complete);
            }
            ThrowIfError(st);
          },
          nb::arg("present_are_complete") = false)
      .def("poll", [](rill::FileStreamConnector& c) { return PollToStream(c); })
      .def("commit_applied",
           [](rill::FileStreamConnector& c) {
             nb::gil_scoped_release release;
             c.CommitApplied();
           })
      .def("take_rejects",
           [](rill::FileStreamConnector& c) { return RejectsToList(c.TakeRejects()); })
      .def("processed_files", &rill::FileStreamConnector::processed_files)
      .def_prop_ro("using_inotify", &rill::FileStreamConnector::using_inotify);

  BindKafka(m);
  BindPostgresCDC(m);
  BindWebSocket(m);
}

}  // namespace rills
