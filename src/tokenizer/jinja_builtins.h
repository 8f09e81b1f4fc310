// The filters, tests, methods and global functions of the chat-template
// engine (tokenizer/jinja.h). Semantics follow @huggingface/jinja where it
// departs from Python Jinja (e.g. str.strip(chars) strips whitespace,
// `title` only raises the first letter of each word).
#pragma once

#include <string>

#include "tokenizer/jinja_value.h"

namespace hqekv::jinja {

// `input | name(args)`. Errors name the filter; the caller adds the position.
Result<Value> ApplyFilter(const std::string& name, const Value& input, const CallArgs& args);

// `value is name(args)`.
Result<bool> ApplyTest(const std::string& name, const Value& value, const CallArgs& args);

// `obj.name`: a dict's key, a list's or string's method bound to it (a
// function value), or undefined.
Value GetMember(const Value& obj, const std::string& name);

// `obj[key]`: list and string by (negative) index, dict by key; undefined
// when absent.
Value GetItem(const Value& obj, const Value& key);

// `obj[start:stop:step]` with Python's slice rules (null parts default).
Result<Value> Slice(const Value& obj, const Value* start, const Value* stop, const Value* step);

// The elements a for loop visits: a list's items, a dict's keys, a
// string's characters (UTF-8 code points).
Result<Array> Iterate(const Value& v);

// Global functions every template sees: raise_exception, namespace, range,
// dict, strftime_now.
Object GlobalFunctions();

}  // namespace hqekv::jinja
