// Global functions of chat templates (see globals.h).
#include "jinja/globals.h"

#include <ctime>
#include <memory>

#include "jinja/call_args.h"
#include "jinja/operators.h"
#include "jinja/runtime.h"
#include "jinja/value_text.h"

namespace kiln::jinja {
namespace {

Value MakeFunction(std::string name, std::function<Expected<Value>(Runtime&, const CallArgs&)> call) {
  auto fn = std::make_shared<Function>();
  fn->name = std::move(name);
  fn->call = std::move(call);
  return Value::FromFunction(std::move(fn));
}

Expected<Value> Range(Runtime& rt, const CallArgs& args) {
  if (!args.keyword.empty()) return InvalidArgument("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) {
    return InvalidArgument("range expected 1 to 3 arguments, got {}", args.positional.size());
  }
  int64_t bounds[3] = {0, 0, 1};
  for (size_t i = 0; i < args.positional.size(); ++i) {
    const Value& v = args.positional[i];
    if (!v.is_integral()) {
      return InvalidArgument("'{}' object cannot be interpreted as an integer", TypeName(v));
    }
    bounds[args.positional.size() == 1 ? 1 : i] = v.as_int();
  }
  int64_t start = bounds[0], stop = bounds[1], step = bounds[2];
  if (step == 0) return InvalidArgument("range() arg 3 must not be zero");
  // The length in 128 bits, so that extreme bounds cannot overflow.
  __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  __int128 stride = step > 0 ? step : -static_cast<__int128>(step);
  __int128 length = span <= 0 ? 0 : (span + stride - 1) / stride;
  if (length > kMaxRange) {
    return ResourceExhausted("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).",
                             kMaxRange);
  }
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(length)));
  auto list = std::make_shared<ListData>();
  list->kind = SequenceKind::kRange;
  list->range_start = start;
  list->range_stop = stop;
  list->range_step = step;
  list->items.reserve(static_cast<size_t>(length));
  for (int64_t i = 0; i < static_cast<int64_t>(length); ++i) {
    list->items.push_back(Value::Int(start + i * step));
  }
  return Value::FromList(std::move(list));
}

// dict(mapping_or_pairs, **kwargs) and namespace(...) take the same arguments.
Status CollectEntries(Runtime& rt, std::string_view callee, const CallArgs& args,
                      std::vector<std::pair<Value, Value>>* out) {
  if (args.positional.size() > 1) {
    return InvalidArgument("{} expected at most 1 argument, got {}", callee, args.positional.size());
  }
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      for (const auto& entry : source.as_dict().entries()) out->push_back(entry);
    } else {
      KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, source));
      for (size_t i = 0; i < items.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(std::vector<Value> pair, IterItems(rt, items[i]));
        if (pair.size() != 2) {
          return InvalidArgument("{} update sequence element #{} has length {}; 2 is required", callee, i,
                                 pair.size());
        }
        out->emplace_back(pair[0], pair[1]);
      }
    }
  }
  for (const auto& [key, value] : args.keyword) out->emplace_back(Value::String(key), value);
  return Status::Ok();
}

Expected<Value> Dict(Runtime& rt, const CallArgs& args) {
  std::vector<std::pair<Value, Value>> entries;
  KILN_RETURN_IF_ERROR(CollectEntries(rt, "dict", args, &entries));
  DictData dict;
  for (auto& [key, value] : entries) KILN_RETURN_IF_ERROR(dict.Set(std::move(key), std::move(value)));
  return MakeDict(std::move(dict));
}

Expected<Value> MakeNamespace(Runtime& rt, const CallArgs& args) {
  std::vector<std::pair<Value, Value>> entries;
  KILN_RETURN_IF_ERROR(CollectEntries(rt, "namespace", args, &entries));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Namespace> ns, rt.NewNamespace());
  for (auto& [key, value] : entries) {
    if (!key.is_string()) return InvalidArgument("namespace keys must be strings, not {}", TypeName(key));
    ns->Set(key.as_string(), std::move(value));
  }
  return Value::FromNamespace(std::move(ns));
}

Expected<Value> Joiner(Runtime&, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("joiner", args, {{"sep", Value::String(", ")}}));
  auto used = std::make_shared<bool>(false);
  Value sep = bound[0];
  return MakeFunction("joiner", [used, sep](Runtime&, const CallArgs&) -> Expected<Value> {
    if (!*used) {
      *used = true;
      return Value::String("");
    }
    return sep;
  });
}

Expected<Value> RaiseException(Runtime& rt, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("raise_exception", args, {{"message", std::nullopt}}));
  KILN_ASSIGN_OR_RETURN(std::string message, ToStr(rt, bound[0]));
  return InvalidArgument("{}", message);
}

Expected<Value> StrftimeNow(Runtime& rt, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("strftime_now", args, {{"format", std::nullopt}}));
  KILN_ASSIGN_OR_RETURN(std::string format, StringArg("strftime_now", "format", bound[0]));
  if (format.empty()) return Value::String("");
  std::tm now = rt.now();
  // strftime returns 0 both for "too small" and for an empty result; a
  // marker character tells the two apart.
  format += '\x01';
  for (size_t size = format.size() * 4 + 64;; size *= 2) {
    KILN_RETURN_IF_ERROR(rt.CheckStringSize(size / 2));
    std::string buf(size, '\0');
    size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &now);
    if (n > 0) {
      buf.resize(n - 1);
      return Value::String(std::move(buf));
    }
  }
}

}  // namespace

std::vector<std::pair<std::string, Value>> GlobalFunctions() {
  return {
      {"range", MakeFunction("range", Range)},
      {"dict", MakeFunction("dict", Dict)},
      {"namespace", MakeFunction("namespace", MakeNamespace)},
      {"joiner", MakeFunction("joiner", Joiner)},
      {"raise_exception", MakeFunction("raise_exception", RaiseException)},
      {"strftime_now", MakeFunction("strftime_now", StrftimeNow)},
  };
}

}  // namespace kiln::jinja
