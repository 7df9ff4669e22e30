// Python `str` semantics over UTF-8 text, for the template interpreter: a
// string is a sequence of code points, and whitespace, case and printability
// follow Python's Unicode rules so that rendered prompts match jinja2's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jinja {

// One decoded code point and the number of bytes it occupies. A malformed
// byte decodes as U+FFFD of size 1, so that iteration always advances.
struct CodePoint {
  char32_t value;
  size_t size;
};

// Decodes the code point that starts at byte `pos`. REQUIRES: pos < s.size().
CodePoint DecodeCodePoint(std::string_view s, size_t pos);

// The number of code points in `s` (Python's len()).
size_t CodePointCount(std::string_view s);

// Byte offsets of every code point in `s`, followed by s.size().
std::vector<size_t> CodePointOffsets(std::string_view s);

// str.isspace() for one code point; also what `\s` matches in Python's re.
bool IsPySpace(char32_t c);

// str.isprintable() for one code point: what repr() leaves unescaped.
bool IsPyPrintable(char32_t c);

// True when `s` holds a code point that IsPySpace accepts at byte `pos`;
// returns its size in *size.
bool PySpaceAt(std::string_view s, size_t pos, size_t* size);

// str.strip/lstrip/rstrip: removes leading and/or trailing code points that
// are whitespace (chars == nullopt) or appear in `chars`.
std::string_view PyStrip(std::string_view s, std::optional<std::string_view> chars, bool left, bool right);

// str.split(sep, maxsplit) and str.rsplit: sep == nullopt splits on runs of
// whitespace and drops empty pieces. REQUIRES: sep is not empty.
std::vector<std::string> PySplit(std::string_view s, std::optional<std::string_view> sep, int64_t maxsplit);
std::vector<std::string> PyRSplit(std::string_view s, std::optional<std::string_view> sep, int64_t maxsplit);

// How many pieces PySplit (or PyRSplit) would return, without building
// them, so that callers can bound the cost first.
size_t PySplitCount(std::string_view s, std::optional<std::string_view> sep, int64_t maxsplit);

// str.splitlines(keepends): splits on every line boundary Python knows.
std::vector<std::string> PySplitLines(std::string_view s, bool keepends);
// How many lines PySplitLines would return.
size_t PySplitLinesCount(std::string_view s);

// Case mapping with Python's results for the characters that map to more
// than one code point where it matters (ß, İ); otherwise Unicode's simple
// mappings.
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
// str.capitalize(): first code point title-cased, the rest lower-cased.
std::string PyCapitalize(std::string_view s);
// str.title(): title-cases the first cased letter of every word.
std::string PyTitle(std::string_view s);
// str.swapcase().
std::string PySwapCase(std::string_view s);

// str.isupper()/islower(): at least one cased character, none of the other case.
bool PyIsUpper(std::string_view s);
bool PyIsLower(std::string_view s);
// str.isalpha/isdigit/isalnum/isspace/isdecimal/isnumeric over the whole,
// non-empty string.
bool PyIsAlpha(std::string_view s);
bool PyIsDigit(std::string_view s);
bool PyIsAlnum(std::string_view s);
bool PyIsSpaceString(std::string_view s);

// str.replace(old, new, count); count < 0 replaces every occurrence.
std::string PyReplace(std::string_view s, std::string_view old_text, std::string_view new_text,
                      int64_t count);

// repr() of a string: quoted, with Python's choice of quote and escapes.
void AppendPyRepr(std::string_view s, std::string* out);

// Python's slice.indices(): clamps optional start/stop for a sequence of
// `length` items and a non-zero `step`, and returns the selected positions.
std::vector<int64_t> PySliceIndices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                    int64_t step);

// Resolves Python's optional [start, end) arguments of find/count/startswith
// against a string of `length` code points.
void PyClampRange(int64_t length, std::optional<int64_t>* start, std::optional<int64_t>* end);

}  // namespace kiln::jinja
