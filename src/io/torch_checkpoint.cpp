// torch_checkpoint.cpp: PyTorch zip checkpoints through libzip, and a restricted unpickler for the state dicts
// torch.save writes (protocol 2; opcodes as CPython's Lib/pickletools.py defines them, the tensor and storage
// conventions as torch/serialization.py `_save` / `_load` and torch/_utils.py `_rebuild_tensor_v2`).
#include "bertrain/io/torch_checkpoint.h"

#include <zip.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <unordered_map>

#include "bertrain/core/error.h"
#include "bertrain/io/safetensors.h"

namespace bertrain {

static_assert(std::endian::native == std::endian::little, "PyTorch records are read as little-endian");

namespace {

std::string where(const std::string& path) { return "PyTorch checkpoint '" + path + "'"; }
std::string where(const std::string& path, const std::string& tensor) {
  return where(path) + ", tensor '" + printable(tensor) + "'";
}

// ---------------------------------------------------------------------------------------------------------
// The storage types torch.save names in persistent ids (torch/storage.py _LegacyStorage subclasses).

struct StorageType {
  const char* global;  // the name after "torch "
  const char* dtype;   // safetensors name
  int size;            // bytes per element
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", "F32", 4}, {"HalfStorage", "F16", 2},  {"BFloat16Storage", "BF16", 2},
    {"DoubleStorage", "F64", 8}, {"LongStorage", "I64", 8}, {"IntStorage", "I32", 4},
    {"ShortStorage", "I16", 2},  {"CharStorage", "I8", 1},  {"ByteStorage", "U8", 1},
    {"BoolStorage", "BOOL", 1},
};

int dtype_bytes(const std::string& d) {
  for (const auto& s : kStorageTypes)
    if (d == s.dtype) return s.size;
  BERTRAIN_ASSERT(false, "unknown dtype ", d);
}

// ---------------------------------------------------------------------------------------------------------
// The zip container (libzip). One archive, used under a mutex: a zip_t is not thread-safe.

struct ZipDeleter {
  void operator()(zip_t* z) const {
    if (z) zip_discard(z);
  }
};

struct Zip {
  std::string path;
  std::string bytes;  // from_memory: the archive's bytes, which the zip source reads in place
  std::unique_ptr<zip_t, ZipDeleter> za;
  std::mutex mu;
};

std::string zip_error_text(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string s = zip_error_strerror(&e);
  zip_error_fini(&e);
  return s;
}

// Deflate expands at most 1032:1 (RFC 1951: a 258-byte match costs at least 2 bits); the slack covers headers.
constexpr uint64_t kMaxDeflateRatio = 1032;

struct EntryInfo {
  zip_uint64_t index = 0;
  uint64_t size = 0;
};

// Validates one entry's declared sizes before anything is read from it.
EntryInfo stat_entry(Zip& z, zip_uint64_t index, const std::string& name, uint64_t limit, const char* what) {
  zip_stat_t st;
  zip_stat_init(&st);
  BERTRAIN_CHECK(zip_stat_index(z.za.get(), index, 0, &st) == 0, where(z.path), ": entry '", printable(name),
                 "': ", zip_strerror(z.za.get()));
  const uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
  BERTRAIN_CHECK((st.valid & need) == need, where(z.path), ": entry '", printable(name), "' lacks its sizes");
  BERTRAIN_CHECK(st.encryption_method == ZIP_EM_NONE, where(z.path), ": entry '", printable(name),
                 "' is encrypted");
  BERTRAIN_CHECK(st.comp_method == ZIP_CM_STORE || st.comp_method == ZIP_CM_DEFLATE, where(z.path), ": entry '",
                 printable(name), "' uses compression method ", st.comp_method,
                 " (torch.save stores records uncompressed; store and deflate are read)");
  BERTRAIN_CHECK(st.size <= limit, where(z.path), ": entry '", printable(name), "' declares ", st.size,
                 " bytes, over the limit of ", limit, " for ", what);
  if (st.comp_method == ZIP_CM_STORE)
    BERTRAIN_CHECK(st.size == st.comp_size, where(z.path), ": stored entry '", printable(name), "' declares ",
                   st.size, " bytes but occupies ", st.comp_size);
  else
    BERTRAIN_CHECK(st.size <= st.comp_size * kMaxDeflateRatio + 1024, where(z.path), ": entry '", printable(name),
                   "' declares ", st.size, " bytes from ", st.comp_size,
                   " compressed, more than deflate can produce (a zip bomb)");
  return {index, st.size};
}

// Reads an entry whose size stat_entry() validated: exactly `size` bytes, and no more (a deflate stream
// longer than declared is refused, not followed). libzip checks the CRC when the entry is read to its end.
std::string read_entry(Zip& z, const EntryInfo& e, const std::string& name) {
  std::lock_guard<std::mutex> lock(z.mu);
  zip_file_t* f = zip_fopen_index(z.za.get(), e.index, 0);
  BERTRAIN_CHECK(f, where(z.path), ": cannot open entry '", printable(name), "': ", zip_strerror(z.za.get()));
  struct Closer {
    zip_file_t* f;
    ~Closer() { zip_fclose(f); }
  } closer{f};
  std::string out(e.size, '\0');
  uint64_t got = 0;
  while (got < e.size) {
    const zip_int64_t n = zip_fread(f, out.data() + got, e.size - got);
    BERTRAIN_CHECK(n >= 0, where(z.path), ": reading entry '", printable(name), "': ", zip_file_strerror(f));
    BERTRAIN_CHECK(n > 0, where(z.path), ": entry '", printable(name), "' ends after ", got, " of its ", e.size,
                   " bytes (truncated)");
    got += static_cast<uint64_t>(n);
  }
  char extra;
  const zip_int64_t n = zip_fread(f, &extra, 1);
  BERTRAIN_CHECK(n >= 0, where(z.path), ": reading entry '", printable(name), "': ", zip_file_strerror(f));
  BERTRAIN_CHECK(n == 0, where(z.path), ": entry '", printable(name), "' holds more than its declared ", e.size,
                 " bytes");
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// The restricted unpickler. Objects live in an arena and refer to each other by index, so a hostile pickle
// can build neither a reference cycle that leaks nor a chain whose destruction recurses.

enum class Kind : uint8_t { None, Bool, Int, Float, Str, Tuple, List, Dict, Global, Storage, Tensor };
enum class Callable : uint8_t { OrderedDict, RebuildTensorV2, RebuildParameter, RebuildParameterWithState, Storage };

struct Obj {
  Kind kind = Kind::None;
  int depth = 1;
  int64_t i = 0;        // Int, Bool; Global: the storage type's index; Storage, Tensor: their index
  double f = 0;
  Callable g{};
  std::string s;        // Str; Global: "module.name" for messages
  std::vector<uint32_t> items;  // Tuple, List: elements; Dict: key, value, key, value, ...
};

struct StorageRef {
  std::string key;
  int type = 0;  // index into kStorageTypes
  int64_t numel = 0;
};

// "an int", "a tuple", ...: for messages.
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "a bool";
    case Kind::Int: return "an int";
    case Kind::Float: return "a float";
    case Kind::Str: return "a str";
    case Kind::Tuple: return "a tuple";
    case Kind::List: return "a list";
    case Kind::Dict: return "a dict";
    case Kind::Global: return "a global";
    case Kind::Storage: return "a storage";
    case Kind::Tensor: return "a tensor";
  }
  return "?";
}

// Every opcode of pickle protocols 0-5 (pickletools.opcodes), for naming a refused one.
const char* opcode_name(unsigned char op) {
  switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
  }
  return nullptr;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) n = 1, cp = c;
    else if ((c & 0xe0) == 0xc0) n = 2, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0) n = 3, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0) n = 4, cp = c & 0x07;
    else return false;
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += n;
  }
  return true;
}

struct ParsedTensor {
  std::string name;
  TorchTensorInfo info;
};

class Unpickler {
 public:
  Unpickler(std::string_view data, const std::string& path, const std::string& pkl_name,
            const TorchCheckpointLimits& limits)
      : data_(data), path_(path), pkl_(pkl_name), limits_(limits) {}

  // Runs the pickle to STOP and returns the state dict's tensors in order, with their storages.
  std::vector<ParsedTensor> run(std::vector<StorageRef>& storages) {
    bool stopped = false;
    while (!stopped) {
      BERTRAIN_CHECK(pos_ < data_.size(), where(path_), ": ", pkl_, " ends at offset ", pos_, " without STOP (truncated)");
      op_at_ = pos_;
      const auto op = static_cast<unsigned char>(data_[pos_++]);
      switch (op) {
        case 0x80: {  // PROTO
          const unsigned v = u8();
          if (v < 2 || v > 5) fail("pickle protocol " + std::to_string(v) + " (torch.save writes protocol 2)");
          break;
        }
        case 0x95: {  // FRAME: a length prefix for buffering; the data follows in line
          const uint64_t n = le(8);
          if (n > data_.size() - pos_) fail("FRAME of " + std::to_string(n) + " bytes runs past the end");
          break;
        }
        case '.': stopped = true; break;
        case '(':
          if (static_cast<int>(marks_.size()) >= limits_.max_depth)
            fail("MARKs nested deeper than " + std::to_string(limits_.max_depth));
          marks_.push_back(stack_.size());
          break;
        case '}': push(make(Kind::Dict)); break;
        case ']': push(make(Kind::List)); break;
        case ')': push(make(Kind::Tuple)); break;
        case 'N': push(make(Kind::None)); break;
        case 0x88: case 0x89: {
          const uint32_t o = make(Kind::Bool);
          arena_[o].i = op == 0x88;
          push(o);
          break;
        }
        case 'J': push_int(static_cast<int32_t>(static_cast<uint32_t>(le(4)))); break;
        case 'K': push_int(static_cast<int64_t>(le(1))); break;
        case 'M': push_int(static_cast<int64_t>(le(2))); break;
        case 0x8a: {  // LONG1: n bytes, little-endian two's complement
          const unsigned n = u8();
          if (n > 8) fail("LONG1 of " + std::to_string(n) + " bytes (integers beyond 64 bits are not read)");
          uint64_t v = le(n);
          if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
          push_int(static_cast<int64_t>(v));
          break;
        }
        case 'G': {  // BINFLOAT: big-endian double
          uint64_t bits = 0;
          const std::string_view b = take(8);
          for (char c : b) bits = (bits << 8) | static_cast<unsigned char>(c);
          const uint32_t o = make(Kind::Float);
          arena_[o].f = std::bit_cast<double>(bits);
          push(o);
          break;
        }
        case 'X': push_str(take(le(4))); break;
        case 0x8c: push_str(take(le(1))); break;
        case 0x8d: push_str(take(le(8))); break;
        case 't': {
          const size_t m = pop_mark();
          push(make_tuple(m, stack_.size()));
          stack_.erase(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end() - 1);
          break;
        }
        case 0x85: case 0x86: case 0x87: {
          const size_t n = op - 0x84;
          need(n);
          const uint32_t t = make_tuple(stack_.size() - n, stack_.size());
          stack_.resize(stack_.size() - n);
          push(t);
          break;
        }
        case 'q': memo_put(le(1)); break;
        case 'r': memo_put(le(4)); break;
        case 0x94: memo_put(memo_.size()); break;
        case 'h': memo_get(le(1)); break;
        case 'j': memo_get(le(4)); break;
        case 'c': {
          const std::string module = line(), name = line();
          push(global(module, name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL (protocol 4): module and name are strings on the stack
          need(2);
          const Obj& m = arena_[stack_[stack_.size() - 2]];
          const Obj& n = arena_[stack_.back()];
          if (m.kind != Kind::Str || n.kind != Kind::Str) fail("STACK_GLOBAL needs two strings");
          const std::string module = m.s, name = n.s;  // copies: global() grows the arena
          const uint32_t g = global(module, name);
          stack_.resize(stack_.size() - 2);
          push(g);
          break;
        }
        case 'R': reduce(); break;
        case 'b': build(); break;
        case 's': {
          need(3);
          set_items(stack_[stack_.size() - 3], stack_.size() - 2);
          stack_.resize(stack_.size() - 2);
          break;
        }
        case 'u': {
          const size_t m = pop_mark();
          if (m == mark_base()) fail("SETITEMS without a dict below its MARK");
          if ((stack_.size() - m) % 2) fail("SETITEMS with an odd number of items");
          set_items(stack_[m - 1], m);
          stack_.resize(m);
          break;
        }
        case 'a': {
          need(2);
          append(stack_[stack_.size() - 2], stack_.size() - 1);
          stack_.pop_back();
          break;
        }
        case 'e': {
          const size_t m = pop_mark();
          if (m == mark_base()) fail("APPENDS without a list below its MARK");
          append(stack_[m - 1], m);
          stack_.resize(m);
          break;
        }
        case 'Q': persistent_load(); break;
        default: {
          const char* nm = opcode_name(op);
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(std::string("refused opcode ") + (nm ? nm : "(unknown)") + " (" + hex +
               "): not one torch.save writes for a state dict");
        }
      }
    }
    op_at_ = pos_ - 1;
    if (stack_.size() != 1 || !marks_.empty())
      fail("STOP with " + std::to_string(stack_.size()) + " values on the stack (one expected)");
    return state_dict(storages_out(storages));
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(where(path_) + ": " + pkl_ + " offset " + std::to_string(op_at_) + ": " + what);
  }

  std::string_view take(uint64_t n) {
    if (n > data_.size() - pos_)
      fail("argument of " + std::to_string(n) + " bytes runs past the end of the pickle (truncated)");
    const std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  unsigned u8() { return static_cast<unsigned char>(take(1)[0]); }
  uint64_t le(unsigned n) {
    const std::string_view b = take(n);
    uint64_t v = 0;
    for (unsigned k = n; k-- > 0;) v = (v << 8) | static_cast<unsigned char>(b[k]);
    return v;
  }
  std::string line() {
    const size_t nl = data_.find('\n', pos_);
    if (nl == std::string_view::npos || nl - pos_ > 256) fail("GLOBAL argument without a newline within 256 bytes");
    std::string s(data_.substr(pos_, nl - pos_));
    pos_ = nl + 1;
    return s;
  }

  uint32_t make(Kind k) {
    if (arena_.size() >= limits_.max_objects)
      fail("more than " + std::to_string(limits_.max_objects) + " objects");
    arena_.emplace_back();
    arena_.back().kind = k;
    return static_cast<uint32_t>(arena_.size() - 1);
  }
  void push(uint32_t o) {
    if (stack_.size() >= limits_.max_objects) fail("stack deeper than " + std::to_string(limits_.max_objects));
    stack_.push_back(o);
  }
  void push_int(int64_t v) {
    const uint32_t o = make(Kind::Int);
    arena_[o].i = v;
    push(o);
  }
  void push_str(std::string_view s) {
    const uint32_t o = make(Kind::Str);
    arena_[o].s = std::string(s);
    push(o);
  }
  // Values below the innermost MARK are out of reach, as in CPython's unpickler (its metastack).
  size_t mark_base() const { return marks_.empty() ? 0 : marks_.back(); }
  void need(size_t n) const {
    if (stack_.size() < mark_base() + n) fail("stack underflow");
  }
  size_t pop_mark() {
    if (marks_.empty()) fail("no MARK to pop");
    const size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }
  void raise_depth(uint32_t container, uint32_t child) {
    const int d = arena_[child].depth + 1;
    if (d > limits_.max_depth) fail("values nested deeper than " + std::to_string(limits_.max_depth));
    arena_[container].depth = std::max(arena_[container].depth, d);
  }
  uint32_t make_tuple(size_t from, size_t to) {
    const uint32_t t = make(Kind::Tuple);
    for (size_t k = from; k < to; ++k) {
      raise_depth(t, stack_[k]);
      arena_[t].items.push_back(stack_[k]);
    }
    return t;
  }
  void memo_put(uint64_t key) {
    need(1);
    if (memo_.size() >= limits_.max_objects) fail("more than " + std::to_string(limits_.max_objects) + " memo entries");
    memo_[key] = stack_.back();
  }
  void memo_get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) fail("memo key " + std::to_string(key) + " was never stored");
    push(it->second);
  }

  // Only what a state dict needs is importable; the check happens here, before any call.
  uint32_t global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    const uint32_t g = make(Kind::Global);
    arena_[g].s = full;
    if (full == "collections.OrderedDict") arena_[g].g = Callable::OrderedDict;
    else if (full == "torch._utils._rebuild_tensor_v2") arena_[g].g = Callable::RebuildTensorV2;
    else if (full == "torch._utils._rebuild_parameter") arena_[g].g = Callable::RebuildParameter;
    else if (full == "torch._utils._rebuild_parameter_with_state") arena_[g].g = Callable::RebuildParameterWithState;
    else {
      bool found = false;
      if (module == "torch")
        for (size_t k = 0; k < std::size(kStorageTypes); ++k)
          if (name == kStorageTypes[k].global) {
            arena_[g].g = Callable::Storage;
            arena_[g].i = static_cast<int64_t>(k);
            found = true;
          }
      if (!found)
        fail("refused global '" + printable(full, 120) +
             "' (only torch tensor rebuilders, typed storages and OrderedDict are allowed)");
    }
    return g;
  }

  const Obj& arg(const Obj& args, size_t k, Kind kind, const char* fn, const char* what) const {
    const Obj& a = arena_[args.items[k]];
    if (a.kind != kind)
      fail(std::string(fn) + " argument " + std::to_string(k + 1) + " (" + what + ") is " + kind_name(a.kind) +
           ", not " + kind_name(kind));
    return a;
  }
  std::vector<int64_t> int_tuple(const Obj& args, size_t k, const char* fn, const char* what) const {
    const Obj& t = arg(args, k, Kind::Tuple, fn, what);
    if (t.items.size() > static_cast<size_t>(Shape::kMaxDims))
      fail(std::string(fn) + " " + what + " has " + std::to_string(t.items.size()) + " dimensions (at most " +
           std::to_string(Shape::kMaxDims) + ")");
    std::vector<int64_t> v;
    for (uint32_t o : t.items) {
      if (arena_[o].kind != Kind::Int) fail(std::string(fn) + " " + what + " holds " + kind_name(arena_[o].kind));
      v.push_back(arena_[o].i);
    }
    return v;
  }

  void reduce() {
    need(2);
    const uint32_t args_o = stack_.back(), fn_o = stack_[stack_.size() - 2];
    const Obj& fn = arena_[fn_o];
    const Obj& args = arena_[args_o];
    if (fn.kind != Kind::Global) fail(std::string("REDUCE of ") + kind_name(fn.kind) + ", not a global");
    if (args.kind != Kind::Tuple) fail(std::string("REDUCE arguments are ") + kind_name(args.kind) + ", not a tuple");
    uint32_t result = 0;
    switch (fn.g) {
      case Callable::OrderedDict:
        if (!args.items.empty()) fail("collections.OrderedDict called with arguments");
        result = make(Kind::Dict);
        break;
      case Callable::RebuildTensorV2: result = rebuild_tensor(args); break;
      case Callable::RebuildParameter:
      case Callable::RebuildParameterWithState: {
        const size_t n = fn.g == Callable::RebuildParameter ? 3 : 4;
        const char* nm = fn.g == Callable::RebuildParameter ? "_rebuild_parameter" : "_rebuild_parameter_with_state";
        if (args.items.size() != n) fail(std::string(nm) + " takes " + std::to_string(n) + " arguments, not " + std::to_string(args.items.size()));
        arg(args, 0, Kind::Tensor, nm, "data");
        arg(args, 1, Kind::Bool, nm, "requires_grad");
        arg(args, 2, Kind::Dict, nm, "backward_hooks");
        result = args.items[0];
        break;
      }
      case Callable::Storage: fail("global '" + fn.s + "' may not be called (storages come from persistent ids)");
    }
    stack_.resize(stack_.size() - 2);
    push(result);
  }

  // torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[,
  // metadata]): a view of `storage`. Bounds are checked after the whole pickle, against the records.
  uint32_t rebuild_tensor(const Obj& args) {
    const char* nm = "_rebuild_tensor_v2";
    if (args.items.size() != 6 && args.items.size() != 7)
      fail(std::string(nm) + " takes 6 or 7 arguments, not " + std::to_string(args.items.size()));
    const Obj& st = arg(args, 0, Kind::Storage, nm, "storage");
    const Obj& off = arg(args, 1, Kind::Int, nm, "storage_offset");
    std::vector<int64_t> size = int_tuple(args, 2, nm, "size"), stride = int_tuple(args, 3, nm, "stride");
    arg(args, 4, Kind::Bool, nm, "requires_grad");
    arg(args, 5, Kind::Dict, nm, "backward_hooks");
    if (arena_[args.items[5]].items.size()) fail("_rebuild_tensor_v2 with backward hooks");
    if (args.items.size() == 7) {
      const Kind k = arena_[args.items[6]].kind;
      if (k != Kind::Dict && k != Kind::None) fail("_rebuild_tensor_v2 metadata is " + std::string(kind_name(k)));
    }
    if (size.size() != stride.size())
      fail("_rebuild_tensor_v2 size has " + std::to_string(size.size()) + " dimensions, stride " +
           std::to_string(stride.size()));
    for (size_t k = 0; k < size.size(); ++k)
      if (size[k] < 0 || stride[k] < 0)
        fail("_rebuild_tensor_v2 size or stride is negative in dimension " + std::to_string(k));
    if (off.i < 0) fail("_rebuild_tensor_v2 storage_offset " + std::to_string(off.i) + " is negative");
    TorchTensorInfo info;
    const StorageRef& s = storages_[static_cast<size_t>(st.i)];
    info.dtype = kStorageTypes[s.type].dtype;
    info.shape = Shape(size);
    info.stride = stride;
    info.storage_offset = off.i;
    info.storage_key = s.key;
    info.storage_numel = s.numel;
    const uint32_t t = make(Kind::Tensor);
    arena_[t].i = static_cast<int64_t>(tensors_.size());
    tensors_.push_back(std::move(info));
    return t;
  }

  void build() {
    need(2);
    const Obj& state = arena_[stack_.back()];
    const Obj& target = arena_[stack_[stack_.size() - 2]];
    // An OrderedDict's instance dict: state_dict()'s `_metadata` (module versions), which carries no weights.
    if (target.kind != Kind::Dict || (state.kind != Kind::Dict && state.kind != Kind::None))
      fail(std::string("BUILD of ") + kind_name(target.kind) + " with " + kind_name(state.kind) +
           " (only an OrderedDict's attributes are accepted)");
    stack_.pop_back();
  }

  void set_items(uint32_t dict, size_t from) {
    if (arena_[dict].kind != Kind::Dict) fail(std::string("SETITEM(S) on ") + kind_name(arena_[dict].kind));
    for (size_t k = from; k + 1 < stack_.size(); k += 2) {
      const uint32_t key = stack_[k], value = stack_[k + 1];
      raise_depth(dict, key);
      raise_depth(dict, value);
      auto& items = arena_[dict].items;
      // A repeated string key replaces the earlier value, as in Python.
      if (arena_[key].kind == Kind::Str) {
        auto [it, fresh] = str_keys_[dict].emplace(arena_[key].s, items.size());
        if (!fresh) {
          items[it->second + 1] = value;
          continue;
        }
      }
      items.push_back(key);
      items.push_back(value);
    }
  }

  void append(uint32_t list, size_t from) {
    if (arena_[list].kind != Kind::List) fail(std::string("APPEND(S) on ") + kind_name(arena_[list].kind));
    for (size_t k = from; k < stack_.size(); ++k) {
      raise_depth(list, stack_[k]);
      arena_[list].items.push_back(stack_[k]);
    }
  }

  // BINPERSID: torch.save's persistent id of a storage, ('storage', storage_type, key, location, numel).
  void persistent_load() {
    need(1);
    const Obj& pid = arena_[stack_.back()];
    const char* nm = "persistent id";
    if (pid.kind != Kind::Tuple || pid.items.size() != 5)
      fail("persistent id is not a 5-tuple ('storage', type, key, location, numel)");
    const Obj& tag = arg(pid, 0, Kind::Str, nm, "'storage'");
    if (tag.s != "storage") fail("persistent id of kind '" + printable(tag.s, 40) + "' (only 'storage')");
    const Obj& type = arg(pid, 1, Kind::Global, nm, "storage type");
    if (type.g != Callable::Storage) fail("persistent id names '" + type.s + "', not a typed storage");
    const Obj& key = arg(pid, 2, Kind::Str, nm, "key");
    arg(pid, 3, Kind::Str, nm, "location");
    const Obj& numel = arg(pid, 4, Kind::Int, nm, "numel");
    if (key.s.empty() || key.s.size() > 64 ||
        !std::all_of(key.s.begin(), key.s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }))
      fail("storage key '" + printable(key.s, 80) + "' is not a record name");
    if (numel.i < 0) fail("storage '" + key.s + "' has negative numel " + std::to_string(numel.i));
    size_t idx;
    auto it = storage_index_.find(key.s);
    if (it == storage_index_.end()) {
      idx = storages_.size();
      storages_.push_back({key.s, static_cast<int>(type.i), numel.i});
      storage_index_[key.s] = idx;
    } else {
      idx = it->second;
      if (storages_[idx].type != type.i || storages_[idx].numel != numel.i)
        fail("storage '" + key.s + "' appears with two types or sizes");
    }
    const uint32_t o = make(Kind::Storage);
    arena_[o].i = static_cast<int64_t>(idx);
    stack_.back() = o;
  }

  std::vector<StorageRef>& storages_out(std::vector<StorageRef>& out) {
    out = storages_;
    return out;
  }

  std::vector<ParsedTensor> state_dict(const std::vector<StorageRef>&) const {
    const Obj& top = arena_[stack_.back()];
    if (top.kind != Kind::Dict)
      fail(std::string("the pickle holds ") + kind_name(top.kind) +
           ", not a state dict (torch.save(model.state_dict()) writes an OrderedDict of tensors)");
    std::vector<ParsedTensor> out;
    for (size_t j = 0; j < top.items.size(); j += 2) {
      const Obj& k = arena_[top.items[j]];
      const Obj& v = arena_[top.items[j + 1]];
      if (k.kind != Kind::Str) fail(std::string("state dict key is ") + kind_name(k.kind) + ", not a string");
      if (!valid_utf8(k.s)) fail("state dict key '" + printable(k.s, 80) + "' is not UTF-8");
      if (v.kind != Kind::Tensor)
        fail("state dict entry '" + printable(k.s, 80) + "' is " + kind_name(v.kind) +
             ", not a tensor (a training checkpoint? save model.state_dict() alone)");
      out.push_back({k.s, tensors_[static_cast<size_t>(v.i)]});
    }
    return out;
  }

  std::string_view data_;
  const std::string& path_;
  const std::string& pkl_;
  const TorchCheckpointLimits& limits_;
  size_t pos_ = 0, op_at_ = 0;
  std::vector<Obj> arena_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
  std::unordered_map<uint32_t, std::unordered_map<std::string, size_t>> str_keys_;  // dict -> key -> item index
  std::vector<StorageRef> storages_;
  std::map<std::string, size_t> storage_index_;
  std::vector<TorchTensorInfo> tensors_;
};

// Elements of a shape, without overflow (dimensions are non-negative; saturates above 2^62).
int64_t safe_numel(const Shape& s) {
  __int128 n = 1;
  for (int64_t d : s) n = std::min<__int128>(n * d, static_cast<__int128>(1) << 62);
  return static_cast<int64_t>(n);
}

// Largest element index a view addresses, or -1 for an empty view; false on overflow.
bool last_element(const TorchTensorInfo& t, int64_t& last) {
  if (safe_numel(t.shape) == 0) {
    last = -1;
    return true;
  }
  __int128 e = t.storage_offset;
  for (int k = 0; k < t.shape.size(); ++k) e += static_cast<__int128>(t.shape[k] - 1) * t.stride[k];
  if (e > INT64_MAX) return false;
  last = static_cast<int64_t>(e);
  return true;
}

}  // namespace

bool TorchTensorInfo::contiguous() const {
  int64_t expect = 1;
  for (int k = shape.size(); k-- > 0;) {
    if (shape[k] != 1 && stride[static_cast<size_t>(k)] != expect) return false;
    expect *= shape[k];
  }
  return true;
}

struct TorchCheckpoint::Impl {
  Zip zip;
  std::string name;  // NAME
  int64_t version = 0;
  std::vector<std::string> order;
  std::map<std::string, TorchTensorInfo> tensors;
  std::map<std::string, EntryInfo> records;  // storage key -> its data/<key> entry
  TorchCheckpointLimits limits;
  // The last storage read: tied weights and views of one storage are read once in a row.
  std::mutex cache_mu;
  std::string cache_key;
  std::shared_ptr<const std::string> cache;
};

namespace {

void open_archive(TorchCheckpoint::Impl& m) {
  Zip& z = m.zip;
  const TorchCheckpointLimits& lim = m.limits;
  const zip_int64_t n = zip_get_num_entries(z.za.get(), 0);
  BERTRAIN_CHECK(n >= 0, where(z.path), ": cannot list the zip entries");
  BERTRAIN_CHECK(static_cast<uint64_t>(n) <= lim.max_entries, where(z.path), ": ", n, " zip entries (at most ",
                 lim.max_entries, ")");
  std::map<std::string, zip_uint64_t> by_name;
  std::vector<std::string> pkls;
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* nm = zip_get_name(z.za.get(), static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
    BERTRAIN_CHECK(nm, where(z.path), ": zip entry ", i, " has no name: ", zip_strerror(z.za.get()));
    const std::string s = nm;
    by_name.emplace(s, static_cast<zip_uint64_t>(i));
    const size_t slash = s.find('/');
    if (slash != std::string::npos && s.compare(slash, std::string::npos, "/data.pkl") == 0) pkls.push_back(s);
  }
  BERTRAIN_CHECK(!pkls.empty(), where(z.path), ": the zip holds no NAME/data.pkl: not a torch.save file");
  BERTRAIN_CHECK(pkls.size() == 1, where(z.path), ": the zip holds ", pkls.size(), " data.pkl records (",
                 printable(pkls[0], 80), ", ", printable(pkls[1], 80), "): one state dict expected");
  m.name = pkls[0].substr(0, pkls[0].size() - 9);
  const std::string prefix = m.name + "/";

  auto small_record = [&](const std::string& rec, bool required) -> std::optional<std::string> {
    auto it = by_name.find(prefix + rec);
    if (it == by_name.end()) {
      BERTRAIN_CHECK(!required, where(z.path), ": the zip has no ", printable(prefix + rec, 80), " record");
      return std::nullopt;
    }
    return read_entry(z, stat_entry(z, it->second, it->first, 4096, "a small record"), it->first);
  };
  auto trim = [](std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
  };
  const std::string version = trim(*small_record("version", true));
  BERTRAIN_CHECK(!version.empty() && version.size() <= 9 &&
                     std::all_of(version.begin(), version.end(), [](char c) { return c >= '0' && c <= '9'; }),
                 where(z.path), ": ", printable(prefix, 80), "version holds '", printable(version, 40), "', not a number");
  m.version = std::stoll(version);
  BERTRAIN_CHECK(m.version >= 1, where(z.path), ": ", printable(prefix, 80), "version is ", m.version);
  if (auto bo = small_record("byteorder", false)) {
    const std::string b = trim(*bo);
    BERTRAIN_CHECK(b == "little", where(z.path), ": byteorder is '", printable(b, 40),
                   "': only little-endian checkpoints are read (re-save it on a little-endian machine)");
  }

  auto pit = by_name.find(pkls[0]);
  const std::string pkl_name = printable(pkls[0], 120);
  const std::string pkl = read_entry(z, stat_entry(z, pit->second, pkls[0], lim.max_pickle_bytes, "data.pkl"), pkls[0]);
  std::vector<StorageRef> storages;
  Unpickler up(pkl, z.path, pkl_name, lim);
  std::vector<ParsedTensor> parsed = up.run(storages);

  uint64_t total = 0;
  for (const StorageRef& s : storages) {
    auto it = by_name.find(prefix + "data/" + s.key);
    BERTRAIN_CHECK(it != by_name.end(), where(z.path), ": storage '", s.key, "' has no record ", printable(prefix, 80),
                   "data/", s.key);
    const EntryInfo e = stat_entry(z, it->second, it->first, lim.max_record_bytes, "one storage");
    const uint64_t bytes = static_cast<uint64_t>(s.numel) * static_cast<uint64_t>(kStorageTypes[s.type].size);
    BERTRAIN_CHECK(s.numel <= INT64_MAX / 8 && e.size == bytes, where(z.path), ": storage '", s.key, "' of ",
                   s.numel, " ", kStorageTypes[s.type].global, " elements needs ", bytes, " bytes, its record has ",
                   e.size);
    total += e.size;
    BERTRAIN_CHECK(total <= lim.max_total_bytes, where(z.path), ": the storages hold more than ", lim.max_total_bytes,
                   " bytes");
    m.records[s.key] = e;
  }
  for (auto& p : parsed) {
    const TorchTensorInfo& t = p.info;
    BERTRAIN_CHECK(!m.tensors.count(p.name), where(z.path, p.name), ": name appears twice");
    int64_t last = 0;
    BERTRAIN_CHECK(last_element(t, last), where(z.path, p.name), ": size ", t.shape.str(),
                   " with its strides overflows");
    BERTRAIN_CHECK(last < t.storage_numel, where(z.path, p.name), ": size ", t.shape.str(), ", stride and offset ",
                   t.storage_offset, " address element ", last, " of a storage of ", t.storage_numel, " elements");
    // numel itself: a view of an expanded (stride-0) dimension may have more elements than its storage.
    const __int128 bytes = static_cast<__int128>(safe_numel(t.shape)) * dtype_bytes(t.dtype);
    const __int128 cap = std::max<__int128>(static_cast<__int128>(t.storage_numel) * dtype_bytes(t.dtype),
                                            lim.max_expanded_bytes);
    BERTRAIN_CHECK(bytes <= cap, where(z.path, p.name), ": size ", t.shape.str(), " repeats its storage of ",
                   t.storage_numel, " elements into more than ", lim.max_expanded_bytes, " bytes");
    m.order.push_back(p.name);
    m.tensors.emplace(p.name, t);
  }
}

// A legacy file starts with the pickled magic number 0x1950a86a20f9469cfc6c (torch/serialization.py MAGIC_NUMBER):
// PROTO 2, LONG1 of 10 bytes.
constexpr unsigned char kLegacyMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                          0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
bool is_legacy_magic(const unsigned char* b, size_t n) {
  return n >= sizeof kLegacyMagic && std::memcmp(b, kLegacyMagic, sizeof kLegacyMagic) == 0;
}

std::shared_ptr<TorchCheckpoint::Impl> open_impl(std::shared_ptr<TorchCheckpoint::Impl> m, bool from_memory) {
  Zip& z = m->zip;
  const std::string& head = z.bytes;
  // Recognise the legacy format (a sequence of pickles, PyTorch < 1.6) for a useful message.
  auto legacy = [&](const unsigned char* b, size_t n) {
    BERTRAIN_CHECK(!is_legacy_magic(b, n), where(z.path),
                   ": legacy torch.save format (PyTorch < 1.6, not a zip): not read; load and save it again with "
                   "PyTorch >= 1.6, or convert it to safetensors");
  };
  int err = 0;
  if (from_memory) {
    legacy(reinterpret_cast<const unsigned char*>(head.data()), head.size());
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t* src = zip_source_buffer_create(head.data(), head.size(), 0, &ze);
    BERTRAIN_CHECK(src, where(z.path), ": ", zip_error_strerror(&ze));
    zip_t* za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    if (!za) {
      zip_source_free(src);
      const std::string msg = zip_error_strerror(&ze);
      zip_error_fini(&ze);
      throw Error(where(z.path) + ": not a readable zip archive: " + msg);
    }
    zip_error_fini(&ze);
    z.za.reset(za);
  } else {
    std::ifstream f(z.path, std::ios::binary);
    BERTRAIN_CHECK(f, "cannot open ", where(z.path));
    unsigned char b[sizeof kLegacyMagic] = {};
    f.read(reinterpret_cast<char*>(b), sizeof b);
    legacy(b, static_cast<size_t>(f.gcount()));
    zip_t* za = zip_open(z.path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &err);
    BERTRAIN_CHECK(za, where(z.path), ": not a readable zip archive: ", zip_error_text(err));
    z.za.reset(za);
  }
  open_archive(*m);
  return m;
}

}  // namespace

TorchCheckpoint TorchCheckpoint::open(const std::string& path, const TorchCheckpointLimits& limits) {
  auto m = std::make_shared<Impl>();
  m->zip.path = path;
  m->limits = limits;
  TorchCheckpoint c;
  c.impl_ = open_impl(std::move(m), false);
  return c;
}

TorchCheckpoint TorchCheckpoint::from_memory(std::string bytes, const std::string& source,
                                             const TorchCheckpointLimits& limits) {
  auto m = std::make_shared<Impl>();
  m->zip.path = source;
  m->zip.bytes = std::move(bytes);
  m->limits = limits;
  TorchCheckpoint c;
  c.impl_ = open_impl(std::move(m), true);
  return c;
}

const std::string& TorchCheckpoint::path() const { return impl_->zip.path; }
const std::string& TorchCheckpoint::archive_name() const { return impl_->name; }
int64_t TorchCheckpoint::version() const { return impl_->version; }
std::vector<std::string> TorchCheckpoint::names() const { return impl_->order; }
bool TorchCheckpoint::contains(const std::string& name) const { return impl_->tensors.count(name) > 0; }

const TorchTensorInfo& TorchCheckpoint::info(const std::string& name) const {
  auto it = impl_->tensors.find(name);
  BERTRAIN_CHECK(it != impl_->tensors.end(), where(impl_->zip.path, name), ": no such tensor");
  return it->second;
}

std::vector<std::string> TorchCheckpoint::sharing_storage(const std::string& name) const {
  const TorchTensorInfo& t = info(name);
  std::vector<std::string> out;
  for (const auto& n : impl_->order)
    if (n != name && impl_->tensors.at(n).storage_key == t.storage_key) out.push_back(n);
  return out;
}

Tensor TorchCheckpoint::load(const std::string& name, std::optional<DType> convert_to) const {
  const TorchTensorInfo& t = info(name);
  Impl& m = *impl_;
  std::shared_ptr<const std::string> rec;
  {
    std::lock_guard<std::mutex> lock(m.cache_mu);
    if (m.cache && m.cache_key == t.storage_key) rec = m.cache;
  }
  if (!rec) {
    const std::string entry = m.name + "/data/" + t.storage_key;
    rec = std::make_shared<const std::string>(read_entry(m.zip, m.records.at(t.storage_key), entry));
    std::lock_guard<std::mutex> lock(m.cache_mu);
    m.cache_key = t.storage_key;
    m.cache = rec;
  }
  // Gather the view's elements in row-major order (bounds were checked at open()).
  const size_t es = static_cast<size_t>(dtype_bytes(t.dtype));
  const int64_t numel = t.shape.numel();
  std::vector<unsigned char> raw(static_cast<size_t>(numel) * es);
  const auto* base = reinterpret_cast<const unsigned char*>(rec->data());
  if (t.contiguous()) {
    if (numel > 0) std::memcpy(raw.data(), base + static_cast<size_t>(t.storage_offset) * es, raw.size());
  } else {
    const int nd = t.shape.size();
    std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
    for (int64_t i = 0; i < numel; ++i) {
      int64_t e = t.storage_offset;
      for (int k = 0; k < nd; ++k) e += idx[static_cast<size_t>(k)] * t.stride[static_cast<size_t>(k)];
      std::memcpy(raw.data() + static_cast<size_t>(i) * es, base + static_cast<size_t>(e) * es, es);
      for (int k = nd; k-- > 0;) {
        if (++idx[static_cast<size_t>(k)] < t.shape[k]) break;
        idx[static_cast<size_t>(k)] = 0;
      }
    }
  }
  Tensor out;
  auto direct = [&](DType d) {
    out = Tensor::empty(t.shape, d);
    BERTRAIN_ASSERT(out.nbytes() == raw.size(), "byte count");
    if (!raw.empty()) std::memcpy(out.raw_data(), raw.data(), raw.size());
  };
  if (t.dtype == "F32") direct(DType::f32);
  else if (t.dtype == "F64") direct(DType::f64);
  else if (t.dtype == "BF16") direct(DType::bf16);
  else if (t.dtype == "I64") direct(DType::i64);
  else if (t.dtype == "I32") direct(DType::i32);
  else if (t.dtype == "I8") direct(DType::i8);
  else if (t.dtype == "F16") {
    out = Tensor::empty(t.shape, DType::f32);
    float* d = out.data<float>();
    for (int64_t i = 0; i < numel; ++i) {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      d[i] = f16_to_f32(h);
    }
  } else {  // I16, U8, BOOL: widened to i32
    out = Tensor::empty(t.shape, DType::i32);
    int32_t* d = out.data<int32_t>();
    for (int64_t i = 0; i < numel; ++i) {
      if (t.dtype == "I16") {
        int16_t v;
        std::memcpy(&v, raw.data() + 2 * i, 2);
        d[i] = v;
      } else if (t.dtype == "U8") {
        d[i] = raw[static_cast<size_t>(i)];
      } else {
        d[i] = raw[static_cast<size_t>(i)] != 0;
      }
    }
  }
  if (convert_to && *convert_to != out.dtype()) out = out.to(*convert_to);
  return out;
}

std::vector<std::pair<std::string, Tensor>> TorchCheckpoint::load_all(std::optional<DType> convert_to) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& n : impl_->order) out.emplace_back(n, load(n, convert_to));
  return out;
}

bool is_torch_checkpoint_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  unsigned char b[sizeof kLegacyMagic] = {};
  f.read(reinterpret_cast<char*>(b), sizeof b);
  const auto n = static_cast<size_t>(f.gcount());
  return (n >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4) || is_legacy_magic(b, n);
}

}  // namespace bertrain
