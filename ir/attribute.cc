#include "ir/attribute.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace kiln {

absl::string_view AttrKindName(AttrKind kind) {
  switch (kind) {
    case AttrKind::kInt:
      return "int";
    case AttrKind::kFloat:
      return "float";
    case AttrKind::kBool:
      return "bool";
    case AttrKind::kString:
      return "string";
    case AttrKind::kInts:
      return "int list";
    case AttrKind::kFloats:
      return "float list";
  }
  return "?";
}

AttrKind KindOf(const AttrValue& value) { return static_cast<AttrKind>(value.index()); }

absl::StatusOr<AttrValue> CoerceAttr(const AttrValue& value, AttrKind kind) {
  const AttrKind have = KindOf(value);
  if (have == kind) return value;
  if (have == AttrKind::kInt && kind == AttrKind::kFloat) {
    return AttrValue(static_cast<double>(std::get<int64_t>(value)));
  }
  if (have == AttrKind::kInts && kind == AttrKind::kFloats) {
    const auto& ints = std::get<std::vector<int64_t>>(value);
    return AttrValue(std::vector<double>(ints.begin(), ints.end()));
  }
  if (have == AttrKind::kFloat && kind == AttrKind::kInt) {
    const double d = std::get<double>(value);
    if (std::trunc(d) == d && std::fabs(d) < 9.0e15) return AttrValue(static_cast<int64_t>(d));
  }
  // A single int where a list is expected is Caffe's "one value for every spatial dim".
  if (have == AttrKind::kInt && kind == AttrKind::kInts) {
    return AttrValue(std::vector<int64_t>{std::get<int64_t>(value)});
  }
  return absl::InvalidArgumentError(absl::StrCat("expected ", AttrKindName(kind), ", got ",
                                                 AttrKindName(have), " ",
                                                 AttrValueToString(value)));
}

namespace {

std::string FloatToString(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", d);
  // Use the shortest representation that round-trips.
  for (int precision = 1; precision <= 17; ++precision) {
    char shorter[40];
    std::snprintf(shorter, sizeof(shorter), "%.*g", precision, d);
    if (std::strtod(shorter, nullptr) == d) {
      std::snprintf(buf, sizeof(buf), "%s", shorter);
      break;
    }
  }
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string QuoteString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Reads one number token; sets `is_float` when it has '.', an exponent, or is nan/inf.
absl::StatusOr<std::string> ConsumeNumberToken(absl::string_view* text, bool* is_float) {
  size_t n = 0;
  *is_float = false;
  while (n < text->size()) {
    const char c = (*text)[n];
    if (absl::ascii_isdigit(c) || c == '-' || c == '+') {
      ++n;
    } else if (c == '.' || c == 'e' || c == 'E' || c == 'n' || c == 'a' || c == 'i' || c == 'f') {
      *is_float = true;
      ++n;
    } else {
      break;
    }
  }
  if (n == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an attribute value at '", text->substr(0, 20), "'"));
  }
  std::string token(text->substr(0, n));
  text->remove_prefix(n);
  return token;
}

}  // namespace

std::string AttrValueToString(const AttrValue& value) {
  switch (KindOf(value)) {
    case AttrKind::kInt:
      return absl::StrCat(std::get<int64_t>(value));
    case AttrKind::kFloat:
      return FloatToString(std::get<double>(value));
    case AttrKind::kBool:
      return std::get<bool>(value) ? "true" : "false";
    case AttrKind::kString:
      return QuoteString(std::get<std::string>(value));
    case AttrKind::kInts:
      return absl::StrCat("[", absl::StrJoin(std::get<std::vector<int64_t>>(value), ","), "]");
    case AttrKind::kFloats: {
      std::vector<std::string> parts;
      for (double d : std::get<std::vector<double>>(value)) parts.push_back(FloatToString(d));
      return absl::StrCat("[", absl::StrJoin(parts, ","), "]");
    }
  }
  return "?";
}

absl::StatusOr<AttrValue> ConsumeAttrValue(absl::string_view* text) {
  *text = absl::StripLeadingAsciiWhitespace(*text);
  if (absl::ConsumePrefix(text, "true")) return AttrValue(true);
  if (absl::ConsumePrefix(text, "false")) return AttrValue(false);
  if (absl::ConsumePrefix(text, "\"")) {
    std::string s;
    while (!text->empty() && text->front() != '"') {
      char c = text->front();
      text->remove_prefix(1);
      if (c == '\\' && !text->empty()) {
        c = text->front() == 'n' ? '\n' : text->front();
        text->remove_prefix(1);
      }
      s += c;
    }
    if (!absl::ConsumePrefix(text, "\"")) {
      return absl::InvalidArgumentError("unterminated string attribute");
    }
    return AttrValue(s);
  }
  if (absl::ConsumePrefix(text, "[")) {
    std::vector<std::string> tokens;
    bool any_float = false;
    *text = absl::StripLeadingAsciiWhitespace(*text);
    while (!absl::ConsumePrefix(text, "]")) {
      if (!tokens.empty() && !absl::ConsumePrefix(text, ",")) {
        return absl::InvalidArgumentError(
            absl::StrCat("expected ',' or ']' in list at '", text->substr(0, 20), "'"));
      }
      *text = absl::StripLeadingAsciiWhitespace(*text);
      bool is_float;
      auto token = ConsumeNumberToken(text, &is_float);
      if (!token.ok()) return token.status();
      any_float |= is_float;
      tokens.push_back(*token);
      *text = absl::StripLeadingAsciiWhitespace(*text);
      if (text->empty()) return absl::InvalidArgumentError("unterminated list attribute");
    }
    if (any_float) {
      std::vector<double> out;
      for (const auto& t : tokens) {
        double d;
        if (!absl::SimpleAtod(t, &d)) {
          return absl::InvalidArgumentError(absl::StrCat("bad float '", t, "'"));
        }
        out.push_back(d);
      }
      return AttrValue(out);
    }
    std::vector<int64_t> out;
    for (const auto& t : tokens) {
      int64_t v;
      if (!absl::SimpleAtoi(t, &v)) {
        return absl::InvalidArgumentError(absl::StrCat("bad int '", t, "'"));
      }
      out.push_back(v);
    }
    return AttrValue(out);
  }
  bool is_float;
  auto token = ConsumeNumberToken(text, &is_float);
  if (!token.ok()) return token.status();
  if (is_float) {
    double d;
    if (!absl::SimpleAtod(*token, &d)) {
      return absl::InvalidArgumentError(absl::StrCat("bad float '", *token, "'"));
    }
    return AttrValue(d);
  }
  int64_t v;
  if (!absl::SimpleAtoi(*token, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("bad int '", *token, "'"));
  }
  return AttrValue(v);
}

}  // namespace kiln
