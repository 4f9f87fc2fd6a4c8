// The Python module `bmpipe`: the CLI's commands (cli/api.hpp) as functions that return
// what the command prints with --json, as plain dicts and lists.
//
// The GIL is released for everything that runs C++ (loading, simulating, planning), so
// Python threads that call bmpipe run in parallel; it is held again only to build the
// Python objects of the answer. The C++ side reads the Config it is given and nothing
// else of Python's, and a Config cannot be changed from Python, so this is safe.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "api/api.hpp"
#include "api/export.hpp"
#include "api/import.hpp"
#include "api/report.hpp"
#include "api/request_table.hpp"
#include "api/search.hpp"
#include "api/search_journal.hpp"
#include "schedules/registry.hpp"
#include "schedules/schedule_file.hpp"

namespace py = pybind11;

namespace {

using bmpipe::Config;
namespace api = bmpipe::api;

// ---- nlohmann::json -> Python -------------------------------------------------------------

/// A str from bytes that should be UTF-8; invalid bytes become U+FFFD, as json_text does
/// when the CLI prints them.
py::str utf8(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

py::object to_python(const nlohmann::json& j) {
  using T = nlohmann::json::value_t;
  switch (j.type()) {
    case T::null:
      return py::none();
    case T::boolean:
      return py::bool_(j.get<bool>());
    case T::number_integer:
      return py::int_(j.get<std::int64_t>());
    case T::number_unsigned:
      return py::int_(j.get<std::uint64_t>());
    case T::number_float: {
      // JSON has no NaN or infinity: the CLI prints them as null, and so do we.
      const double d = j.get<double>();
      return std::isfinite(d) ? py::object(py::float_(d)) : py::object(py::none());
    }
    case T::string:
      return utf8(j.get_ref<const std::string&>());
    case T::array: {
      py::list list(j.size());
      std::size_t i = 0;
      for (const nlohmann::json& e : j) list[i++] = to_python(e);
      return list;
    }
    case T::object: {
      py::dict dict;
      for (auto it = j.begin(); it != j.end(); ++it) dict[utf8(it.key())] = to_python(it.value());
      return dict;
    }
    case T::binary:
    case T::discarded:
      break;
  }
  throw std::logic_error("bmpipe: a summary holds a JSON value with no Python form");
}

// ---- errors -------------------------------------------------------------------------------

/// A command-line key in Python's spelling: "--memory-limit-GiB" -> "memory_limit_GiB",
/// and a config key an override set (Config::fail marks it "(from the command line)") as
/// the keyword that set it: "training.pp (from the command line)" -> "pp". Other config
/// keys ("training.pp") stay as they are.
std::string python_key(const std::string& key) {
  const std::string overridden = " (from the command line)", training = "training.";
  if (key.size() > overridden.size() &&
      key.compare(key.size() - overridden.size(), overridden.size(), overridden) == 0) {
    const std::string k = key.substr(0, key.size() - overridden.size());
    return k.rfind(training, 0) == 0 ? k.substr(training.size()) : k;
  }
  if (key.rfind("--", 0) != 0) return key;
  std::string k = key.substr(2);
  for (char& c : k)
    if (c == '-') c = '_';
  return k;
}

/// Raises bmpipe.ConfigError with its attributes set; line 0 and an empty key are None.
void raise_config_error(const std::string& file, int line, const std::string& key,
                        const std::string& message, const std::string& text) {
  const py::object cls = py::module_::import("bmpipe").attr("ConfigError");
  py::object e = cls(utf8(text));
  e.attr("file") = utf8(file);
  e.attr("line") = line > 0 ? py::object(py::int_(line)) : py::object(py::none());
  e.attr("key") = key.empty() ? py::object(py::none()) : py::object(utf8(key));
  e.attr("message") = utf8(message);
  PyErr_SetObject(cls.ptr(), e.ptr());
}

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const bmpipe::ConfigError& e) {
    // Rebuilt rather than what(), so that an override's key reads as the keyword given. A
    // key on a line of a file (a Megatron-LM flag in an imported script) is the file's word.
    const std::string key = e.line() > 0 ? e.key() : python_key(e.key());
    raise_config_error(e.file(), e.line(), key, e.message(),
                       e.file() + (e.line() > 0 ? ":" + std::to_string(e.line()) : "") + ": " +
                           (key.empty() ? "" : key + ": ") + e.message());
  } catch (const bmpipe::ScheduleFileError& e) {
    raise_config_error(e.file(), e.row(), "", e.message(), e.what());
  } catch (const api::RequestError& e) {
    PyErr_SetObject(PyExc_ValueError, utf8(python_key(e.key()) + ": " + e.message()).ptr());
  } catch (const api::OutputError& e) {
    PyErr_SetObject(PyExc_OSError, utf8(e.what()).ptr());
  } catch (const api::NoPlanFits& e) {
    PyErr_SetObject(py::module_::import("bmpipe").attr("NoPlanFitsError").ptr(),
                    utf8(e.what()).ptr());
  }
}

// ---- arguments ----------------------------------------------------------------------------

/// A path (str, bytes or os.PathLike) as a std::string.
std::string path_string(const py::handle& h) {
  return py::str(py::module_::import("os").attr("fsdecode")(h));
}

/// The `set` keyword (the command line's repeated --set KEY=VALUE): a dict {key: value}
/// (a value a str of YAML, or a bool, int or float) or a list of "KEY=VALUE" strs, in order.
/// None: nothing set.
std::vector<std::pair<std::string, std::string>> sets_of(const py::handle& h) {
  std::vector<std::pair<std::string, std::string>> out;
  if (h.is_none()) return out;
  auto value_text = [](const py::handle& v) -> std::string {
    if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
    if (py::isinstance<py::str>(v)) return v.cast<std::string>();
    if (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v))
      return py::str(v).cast<std::string>();
    throw py::type_error("set: a value must be a str (YAML), bool, int or float, got " +
                         py::str(py::type::handle_of(v).attr("__name__")).cast<std::string>());
  };
  if (py::isinstance<py::dict>(h)) {
    for (const auto& [key, value] : h.cast<py::dict>()) {
      if (!py::isinstance<py::str>(key)) throw py::type_error("set: a key must be a str");
      out.emplace_back(key.cast<std::string>(), value_text(value));
    }
    return out;
  }
  if (py::isinstance<py::str>(h) || !py::isinstance<py::sequence>(h))
    throw py::type_error("set: expected a dict {key: value} or a list of 'KEY=VALUE' strs");
  for (const py::handle& item : h.cast<py::sequence>()) {
    if (!py::isinstance<py::str>(item))
      throw py::type_error("set: expected a dict {key: value} or a list of 'KEY=VALUE' strs");
    const std::string kv = item.cast<std::string>();
    // As the command line's --set (cli/options.cpp append_batch_and_sets).
    const std::size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw api::RequestError(
          "--set", "expected KEY=VALUE, e.g. training.sequence_parallel=true, got '" + kv + "'");
    out.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return out;
}

/// A Config from a path (str, bytes or os.PathLike) or YAML text (a str that names no
/// file), read with `o` as the command reads its CONFIG: a file valid only with pp=2 loads.
Config load_with(const py::handle& source, const bmpipe::Overrides& o) {
  const bool text = py::isinstance<py::str>(source);
  const std::string s = text ? source.cast<std::string>() : path_string(source);
  py::gil_scoped_release nogil;
  return text ? api::load_config_source(s, o) : bmpipe::load_config(s, o);
}

Config load(const py::handle& source, const py::handle& set) {
  bmpipe::Overrides o;
  o.set = sets_of(set);
  return load_with(source, o);
}

/// The config argument of every command: a Config, or anything load() takes, read with
/// the request's overrides `o`. A Config was read already: it takes no set (the keywords
/// that set config keys: set, and tp, dp, ... where the command takes them), and the other
/// overrides are applied to a copy.
Config config_for(const py::handle& h, const bmpipe::Overrides& o) {
  if (!py::isinstance<Config>(h)) return load_with(h, o);
  if (!o.set.empty())
    throw api::RequestError("--set",
                            "applies while the config is read: give the path or YAML text, "
                            "or load(..., set=...), not a loaded Config");
  Config c = h.cast<Config>();
  if (o.schedule || o.pp || o.vpp || o.microbatches || o.limits) {
    py::gil_scoped_release nogil;
    bmpipe::apply_overrides(c, o);
  }
  return c;
}

// ---- keyword arguments from a request table ------------------------------------------------

/// A Python value as an option of its kind (api/request_table.hpp). Throws TypeError.
api::OptionValue python_value(const api::OptionSpec& o, const py::handle& v) {
  using K = api::OptionKind;
  const std::string name = api::python_name(o.name);
  auto as = [&]<class T>(const char* expected, T*) -> api::OptionValue {
    py::detail::make_caster<T> caster;
    if (!caster.load(v, true))
      throw py::type_error(name + ": expected " + expected + ", got " +
                           py::str(py::type::handle_of(v).attr("__name__")).cast<std::string>());
    return api::OptionValue(py::detail::cast_op<T>(std::move(caster)));
  };
  switch (o.kind) {
    case K::flag:
      return as("a bool", static_cast<bool*>(nullptr));
    case K::int32:
      return as("an int", static_cast<int*>(nullptr));
    case K::int64:
      return as("an int", static_cast<std::int64_t*>(nullptr));
    case K::uint64:
      return as("a non-negative int", static_cast<std::uint64_t*>(nullptr));
    case K::number:
      return as("a number", static_cast<double*>(nullptr));
    case K::text:
      return as("a str", static_cast<std::string*>(nullptr));
    case K::int_list:
      return as("a list of ints", static_cast<std::vector<int>*>(nullptr));
    case K::name_list:
      return as("a list of strs", static_cast<std::vector<std::string>*>(nullptr));
    case K::repeated: {
      std::vector<std::string> kvs;
      for (const auto& [key, value] : sets_of(v)) kvs.push_back(key + "=" + value);
      return kvs;
    }
    case K::yaml:
      break;
  }
  // A config key's value: YAML text, or a bool, int or float; a list (partition) as the
  // command line's comma-separated one.
  auto text = [&](const py::handle& x) -> std::string {
    if (py::isinstance<py::bool_>(x)) return x.cast<bool>() ? "true" : "false";
    if (py::isinstance<py::str>(x) || py::isinstance<py::int_>(x) || py::isinstance<py::float_>(x))
      return py::str(x).cast<std::string>();
    throw py::type_error(name + ": expected a str (YAML), bool, int or float, got " +
                         py::str(py::type::handle_of(x).attr("__name__")).cast<std::string>());
  };
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    std::string joined;
    for (const py::handle& item : v.cast<py::sequence>())
      joined += (joined.empty() ? "" : ",") + text(item);
    return joined;
  }
  return text(v);
}

/// The request `function` is called with: each keyword an option of `table` (None: not
/// given), set as the command line sets it. Throws TypeError for an unknown keyword (with
/// "did you mean") or a value of the wrong type, RequestError for a bad value.
template <class R>
R request_of(const api::RequestTable<R>& table, const py::dict& kwargs, const char* function) {
  std::vector<std::string> names;
  for (const api::OptionSpec& o : table) names.push_back(api::python_name(o.name));
  for (const auto& item : kwargs) {
    const std::string k = py::str(item.first);
    if (std::find(names.begin(), names.end(), k) == names.end())
      throw py::type_error(std::string(function) + "() got an unexpected keyword argument '" + k +
                           "'" + api::did_you_mean_option(k, names));
  }
  R r;
  api::apply_options<R>(
      table,
      [&](const api::OptionSpec& o) -> std::optional<api::OptionValue> {
        const py::str key(api::python_name(o.name));
        if (!kwargs.contains(key) || kwargs[key].is_none()) return std::nullopt;
        return python_value(o, kwargs[key]);
      },
      r);
  return r;
}

/// The keywords of a table for a docstring: "name (default D): help", one a line.
template <class R>
std::string keywords_doc(const api::RequestTable<R>& table) {
  std::string doc = "\n\nKeyword arguments (the command's options; None: not given):\n";
  for (const api::OptionSpec& o : table) {
    const std::string shown = api::default_shown(o);
    doc += "  " + api::python_name(o.name) + (shown.empty() ? "" : " (default " + shown + ")") +
           ": " + o.help + (o.applies.empty() ? "" : " [applies with " + o.applies + "]") + "\n";
  }
  return doc;
}

/// The bytes a journal's header hashes for the config argument `h`, as `bmpipe search`
/// hashes its CONFIG file: the file's bytes, or the YAML text given. A Config read from
/// YAML text has no file to read again.
std::string config_bytes(const py::handle& h) {
  std::string path;
  if (py::isinstance<Config>(h)) {
    path = h.cast<const Config&>().file;
    if (path == "<string>")
      throw api::RequestError("--journal",
                              "a Config loaded from YAML text has no file to hash; give "
                              "search() the text itself");
  } else if (py::isinstance<py::str>(h)) {
    const std::string s = h.cast<std::string>();
    if (!api::config_source_is_path(s)) return s;
    path = s;
  } else {
    path = path_string(h);
  }
  try {
    return api::read_config_bytes(path);  // as `bmpipe search` reads its CONFIG
  } catch (const bmpipe::ConfigError& e) {
    throw api::RequestError("--journal", path + ": " + e.message());
  }
}

/// `kwargs` with the arguments a function takes by position (schedule, pp, ... of
/// simulate) put in by their keywords; None ones are left out.
py::dict with_positional(const py::kwargs& kwargs,
                         std::initializer_list<std::pair<const char*, py::object>> named) {
  py::dict all(kwargs);
  for (const auto& [name, value] : named)
    if (!value.is_none()) all[py::str(name)] = value;
  return all;
}

/// Runs `f` without the GIL and returns its JSON as Python objects.
template <class F>
py::object released(F f) {
  nlohmann::json document;
  {
    py::gil_scoped_release nogil;
    document = f();
  }
  return to_python(document);
}

}  // namespace

PYBIND11_MODULE(bmpipe, m) {
  m.doc() =
      "bmpipe: a discrete-event simulator of pipeline-parallel training, with a planner.\n"
      "Each function returns what the matching `bmpipe` command prints with --json.";
  m.attr("__version__") = BMPIPE_VERSION;

  py::object config_error = py::exception<bmpipe::ConfigError>(m, "ConfigError", PyExc_ValueError);
  config_error.attr("__doc__") =
      "Bad input: .file, .line (1-based, None when no line applies), .key (the key path, or "
      "the keyword argument, None when none applies) and .message.";
  for (const char* attr : {"file", "line", "key", "message"}) config_error.attr(attr) = py::none();
  py::object no_fit = py::exception<api::NoPlanFits>(m, "NoPlanFitsError", PyExc_RuntimeError);
  no_fit.attr("__doc__") =
      "plan() found no plan within the memory limit; the message names the rank that comes "
      "closest.";
  py::register_exception_translator(&translate);

  py::class_<Config>(m, "Config",
                     "A checked experiment config (cluster, model, training), from load(). "
                     "Read-only: the commands take overrides as keyword arguments.")
      .def_property_readonly("file", [](const Config& c) { return utf8(c.file); })
      .def_property_readonly("model", [](const Config& c) { return utf8(c.model.name); })
      .def_property_readonly("device", [](const Config& c) { return utf8(c.device.name); })
      .def_property_readonly("analytic", [](const Config& c) { return c.model.analytic(); })
      .def_property_readonly("schedule", [](const Config& c) { return c.training.schedule; })
      .def_property_readonly("pp", [](const Config& c) { return c.training.pp; })
      .def_property_readonly("vpp", [](const Config& c) { return c.training.vpp; })
      .def_property_readonly("tp", [](const Config& c) { return c.training.tp; })
      .def_property_readonly("microbatches",
                             [](const Config& c) { return c.training.microbatches; })
      .def("__repr__", [](const Config& c) {
        return py::str("<bmpipe.Config {!r}: {}, {} pp {} vpp {} microbatches {}>")
            .format(utf8(c.file), utf8(c.model.name), c.training.schedule, c.training.pp,
                    c.training.vpp, c.training.microbatches);
      });

  m.def("load", &load, py::arg("source"), py::kw_only(), py::arg("set") = py::none(),
        "A Config from a YAML file (a path, str or os.PathLike), or from YAML text when the "
        "str names no file. set: config keys set before it is read, as the command line's "
        "repeated --set KEY=VALUE: a dict {'training.sequence_parallel': 'true'} (values are "
        "YAML; bool, int and float are taken too) or a list of 'KEY=VALUE' strs. Raises "
        "ConfigError.");

  m.def(
      "schedules",
      [] {
        std::vector<std::string> names;
        for (const bmpipe::ScheduleInfo& s : bmpipe::builtin_schedules())
          names.emplace_back(s.name);
        return names;
      },
      "The names of the built-in schedules, in the order `bmpipe schedules` lists them.");

  const std::string simulate_doc =
      "Simulates one iteration and returns the summary `bmpipe simulate --json` prints "
      "(ok is False, with error and blocked, when the schedule deadlocks). The keywords are "
      "the command's options (schedule, pp, vpp and microbatches may be given by position; "
      "schedule_file, a path, replays a schedule CSV instead; set is --set KEY=VALUE, as "
      "load() takes it). Raises ConfigError for the config, ValueError for a bad option, "
      "TypeError for an unknown keyword." +
      keywords_doc(api::simulate_options());
  m.def(
      "simulate",
      [](const py::handle& config, const py::object& schedule, const py::object& pp,
         const py::object& vpp, const py::object& microbatches, const py::kwargs& kwargs) {
        py::dict all = with_positional(
            kwargs,
            {{"schedule", schedule}, {"pp", pp}, {"vpp", vpp}, {"microbatches", microbatches}});
        // A path as os.PathLike too, as the other paths.
        if (all.contains("schedule_file") && !all["schedule_file"].is_none())
          all["schedule_file"] = py::str(path_string(all["schedule_file"]));
        const api::SimulateRequest r = request_of(api::simulate_options(), all, "simulate");
        api::check_simulate_request(r);  // before the file is read, as the command
        const Config c = config_for(config, r.overrides);
        return released([&] { return api::run_simulate(c, r).report.summary; });
      },
      py::arg("config"), py::arg("schedule") = py::none(), py::arg("pp") = py::none(),
      py::arg("vpp") = py::none(), py::arg("microbatches") = py::none(), simulate_doc.c_str());

  const std::string compare_doc =
      "Runs each schedule (a list of names) on the config and returns the list `bmpipe "
      "compare --json` prints: fastest first; a schedule that refuses the config is "
      "{schedule, ok: False, error}. The keywords are the command's options." +
      keywords_doc(api::compare_options());
  m.def(
      "compare",
      [](const py::handle& config, const py::object& schedules, const py::kwargs& kwargs) {
        const api::CompareRequest r = request_of(
            api::compare_options(), with_positional(kwargs, {{"schedules", schedules}}), "compare");
        api::check_compare_request(r);  // a misspelt schedule fails before the file is read
        const Config c = config_for(config, r.overrides);
        return released([&] { return api::run_compare(c, r).summary; });
      },
      py::arg("config"), py::arg("schedules"), compare_doc.c_str());

  const std::string cost_doc =
      "The analytic cost model's per-layer table, as `bmpipe cost --json` prints it (with "
      "every layer's sub-ops when ops=True). The other keywords are the command's overrides. "
      "Raises ConfigError for measured layers." +
      keywords_doc(api::override_options(api::kCostVppHelp));
  m.def(
      "cost",
      [](const py::handle& config, bool ops, const py::kwargs& kwargs) {
        const bmpipe::Overrides o =
            request_of(api::override_options(api::kCostVppHelp), kwargs, "cost");
        const Config c = config_for(config, o);
        return released([&] { return api::run_cost(c, ops).summary; });
      },
      py::arg("config"), py::kw_only(), py::arg("ops") = false, cost_doc.c_str());

  const std::string plan_doc =
      "Searches the layers of every stage and the recompute mode of every layer for the "
      "fastest simulated iteration that fits, and returns what `bmpipe plan --json` prints. "
      "The keywords are the command's options (schedule may be 'auto'; set is --set "
      "KEY=VALUE, as load() takes it; tp, dp, micro_batch_size, global_batch_size, "
      "seq_length, recompute and partition are config keys, read with the config). Raises "
      "NoPlanFitsError when nothing fits, ValueError for a bad option, TypeError for an "
      "unknown keyword." +
      keywords_doc(api::plan_options());
  m.def(
      "plan",
      [](const py::handle& config, const py::kwargs& kwargs) {
        const api::PlanRequest r = request_of(api::plan_options(), kwargs, "plan");
        // Read with the overrides, as the command reads its CONFIG; "auto" is not a
        // schedule the file's checks know, so it stays for run_plan alone.
        bmpipe::Overrides o = r.overrides;
        if (o.schedule == "auto") o.schedule.reset();
        const Config c = config_for(config, o);
        return released([&] { return api::run_plan(c, r).summary; });
      },
      py::arg("config"), py::kw_only(), plan_doc.c_str());

  const std::string search_doc =
      "Finds the fastest parallel layout and returns what `bmpipe search --json` prints: "
      "{layouts, search}, every layout ranked. The keywords are the command's options: tp, "
      "pp, vpp, micro_batch_size, schedules, ep, etp and cp are lists (None: the command's "
      "default range); max_evals and time_limit_s bound the whole search (search.stopped_by "
      "says which stopped it); set is --set KEY=VALUE, as load() takes it; expressible (a "
      "framework) ranks only the layouts it runs, as the command's --format does. journal (a path) "
      "is --journal FILE: every planned layout is appended to it, and a journal of the same "
      "search (this call's or `bmpipe search`'s) is read back instead of planning its "
      "layouts again, with the same result; a journal of other inputs raises ValueError, a "
      "torn last line is dropped with a UserWarning ('note: ...'). resume (a path) is "
      "journal by another name: resume='FILE' finishes a search a budget, a kill or `bmpipe "
      "search --journal FILE` left. Raises ConfigError for the config, ValueError for a bad "
      "option, TypeError for an unknown keyword, OSError when the journal cannot be written." +
      keywords_doc(api::search_options());
  m.def(
      "search",
      [](const py::handle& config, std::optional<py::object> journal,
         std::optional<py::object> resume, const py::kwargs& kwargs) {
        // resume= is journal= by the name of what it is for: read back what an interrupted
        // search finished, plan the rest, record them.
        if (resume && journal)
          throw api::RequestError("--journal",
                                  "resume= and journal= name the same file: give one of them");
        if (resume) journal = std::move(resume);
        const api::SearchRequest r = request_of(api::search_options(), kwargs, "search");
        const Config c = config_for(config, r.overrides);  // its set alone
        nlohmann::json document;
        if (journal) {
          // The inputs as `bmpipe search CONFIG ... --journal` hashes them, so either
          // resumes the other's journal: the margin as given (or the request's default).
          const py::object pct =
              kwargs.contains("screen_margin_pct") ? kwargs["screen_margin_pct"] : py::none();
          const std::optional<double> margin =
              pct.is_none() ? std::nullopt : std::optional<double>(pct.cast<double>());
          const std::string bytes = config_bytes(config);
          const api::JournalRequest j{path_string(*journal),
                                      api::search_inputs_hash(bytes, r, margin),
                                      api::inputs_before_framework(bytes, r, margin)};
          std::vector<std::string> notes;
          {
            py::gil_scoped_release nogil;
            document = api::run_search(c, r, j, [&](const std::string& n) { notes.push_back(n); });
          }
          const py::object warn = py::module_::import("warnings").attr("warn");
          for (const std::string& n : notes) warn(utf8("note: " + n));
          return to_python(document);
        }
        {
          py::gil_scoped_release nogil;
          document = api::run_search(c, r);
        }
        return to_python(document);
      },
      py::arg("config"), py::kw_only(), py::arg("journal") = py::none(),
      py::arg("resume") = py::none(), search_doc.c_str());

  const std::string export_doc =
      "The config as the framework's settings, and the time the framework gets as bmpipe "
      "simulates them: the dict `bmpipe export CONFIG --format FORMAT --json` prints "
      "({format, text, schedule, vpp, iteration_time_ms, fits, exact, ...}); format is its "
      "--format, as listed below. No planning: give a plan's or a search's output config. "
      "The keywords are the command's options. Raises ConfigError for the config, "
      "ValueError for a bad format." +
      keywords_doc(api::export_options());
  m.def(
      "export_config",
      [](const py::handle& config, const py::object& format, const py::kwargs& kwargs) {
        const api::ExportCommandRequest r = request_of(
            api::export_options(), with_positional(kwargs, {{"format", format}}), "export_config");
        api::check_export_request(r.request);  // a typo fails before the file is read
        const Config c = config_for(config, r.overrides);
        return released([&] { return api::export_config(c, r.request).summary; });
      },
      py::arg("config"), py::arg("format"), export_doc.c_str());

  const std::string report_doc =
      "The self-contained HTML page `bmpipe report CONFIG --out FILE.html` writes, as a str: "
      "the run's summary, timeline and memory, and with compare (a list of schedules), "
      "plan=True and search=True those too. The keywords are the command's options (set is "
      "--set KEY=VALUE, as load() takes it). Raises ConfigError for the config, ValueError "
      "for a bad option, NoPlanFitsError when plan=True finds nothing that fits." +
      keywords_doc(api::report_options());
  m.def(
      "report",
      [](const py::handle& config, const py::kwargs& kwargs) {
        api::ReportRequest r = request_of(api::report_options(), kwargs, "report");
        api::finish_report_request(r);
        const Config c = config_for(config, r.simulate.overrides);
        std::string page;
        {
          py::gil_scoped_release nogil;
          page = api::report_html(api::report_data(c, r));
        }
        return utf8(page);
      },
      py::arg("config"), py::kw_only(), report_doc.c_str());

  m.def(
      "import_config",
      [](const std::string& format, const py::handle& path, std::optional<py::object> cluster,
         std::optional<std::string> preset, std::optional<long long> devices, std::optional<int> pp,
         std::optional<int> microbatches, bool allow_unmodelled) {
        api::ImportRequest r;
        r.format = format;
        r.input = path_string(path);
        if (cluster) r.cluster = path_string(*cluster);
        r.preset = std::move(preset);
        r.devices = devices;
        r.pp = pp;
        r.microbatches = microbatches;
        r.allow_unmodelled = allow_unmodelled;
        api::ImportOutcome imported;
        {
          py::gil_scoped_release nogil;
          imported = api::run_import(r);
        }
        // What the command lists on stderr: flags it does not model, approximations.
        const py::object warn = py::module_::import("warnings").attr("warn");
        for (const std::string& i : imported.ignored) warn(utf8("ignored: " + i));
        for (const std::string& n : imported.notes) warn(utf8("note: " + n));
        for (const std::string& w : imported.warnings) warn(utf8("warning: " + w));
        return utf8(imported.yaml);
      },
      py::arg("format"), py::arg("path"), py::kw_only(), py::arg("cluster") = py::none(),
      py::arg("preset") = py::none(), py::arg("devices") = py::none(), py::arg("pp") = py::none(),
      py::arg("microbatches") = py::none(), py::arg("allow_unmodelled") = false,
      "The bmpipe YAML config `bmpipe import FORMAT PATH` prints, as a str that load() "
      "takes. format: 'megatron' (launch arguments), 'mindformers' (a YAML) or 'profile' (a "
      "per-layer CSV, with pp and microbatches); the cluster is a cluster YAML file, or "
      "preset with devices. Flags the import does not model and approximations come as "
      "UserWarnings ('ignored: ...', 'note: ...'). A flag or key that changes time or memory "
      "in a way bmpipe does not model raises ConfigError, unless allow_unmodelled=True, which "
      "makes it a UserWarning ('warning: ...'). Raises ConfigError for the input, "
      "ValueError for a bad option.");
}
