// Typed reads of a client's JSON object. A field that is absent or null is
// "not given" and leaves the output alone; a field of the wrong type or out
// of range is an error naming it, which the reader keeps for the caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_input.h"
#include "server/api_error.h"

namespace kiln::server {

// The outcome of a parse: nothing, or the error to answer with.
using ApiStatus = std::optional<ApiError>;

// Parses a request body: a JSON object, or a 400 saying where the text
// stops being JSON.
ApiStatus ParseJsonObject(const std::string& text, nlohmann::json* out);

// Each read returns false on an error, which error() then describes.
// REQUIRES: `object` is a JSON object and outlives the reader.
class JsonFields {
 public:
  // `prefix` is prepended to field names in errors ("messages[2].").
  explicit JsonFields(const nlohmann::json& object, std::string prefix = "");

  // The field's value, or null when it is absent.
  const nlohmann::json& Get(const char* name) const;
  // True when the field is present and not null.
  bool Has(const char* name) const { return !Get(name).is_null(); }

  // A number in [min, max].
  bool Number(const char* name, double min, double max, std::optional<double>* out);
  // An integer (a number without a fractional part) in [min, max].
  bool Integer(const char* name, int64_t min, int64_t max, std::optional<int64_t>* out);
  bool Bool(const char* name, std::optional<bool>* out);
  bool String(const char* name, std::optional<std::string>* out);
  // A string or a list of strings, each non-empty; at most `max_count`.
  bool StringOrList(const char* name, size_t max_count, std::optional<std::vector<std::string>>* out);
  // A list of integers in [min, max]; at most `max_count`.
  bool IntegerList(const char* name, int64_t min, int64_t max, size_t max_count,
                   std::optional<std::vector<int64_t>>* out);

  // Records a 400 about `name` and returns false, for checks of the caller's own.
  bool Fail(const std::string& name, const std::string& problem);

  // The error of the last failed read.
  const ApiError& error() const { return error_; }
  // The name errors use for `name`: prefix + name.
  std::string Path(const std::string& name) const { return prefix_ + name; }

 private:
  bool WrongType(const char* name, const char* expected);

  const nlohmann::json& object_;
  std::string prefix_;
  ApiError error_;
};

}  // namespace kiln::server
