// torch.save archives: LibTorch's zip reader, and a pickle machine restricted to state dicts.
#include "interop/torch_archive.hpp"

#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/errors.hpp"

namespace icl::interop {

namespace {

struct Value;
using Ref = std::shared_ptr<Value>;

struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kTuple,
    kList,
    kDict,
    kGlobal,
    kStorage,
    kTensor
  };
  Kind kind = Kind::kNone;
  std::int64_t i = 0;                      // kBool, kInt; kStorage: its element count
  double f = 0;                            // kFloat
  std::string s;                           // kStr; kGlobal: "module.name"; kStorage: the record key
  std::vector<Ref> items;                  // kTuple, kList; kDict: key, value, key, value, ...
  Ref storage;                             // kTensor
  std::int64_t offset = 0;                 // kTensor
  std::vector<std::int64_t> size, stride;  // kTensor
  torch::ScalarType dtype = torch::kFloat;  // kStorage
  // kDict: the position in `items` of each string key, so that a dict of many keys is built in
  // linear time (a linear search per SETITEM made 200,000 keys take minutes).
  std::unordered_map<std::string, std::size_t> index;
  Value() = default;
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;
  ~Value();
};

// Releases the children without recursion: a pickle of one value inside 10^6 nested tuples
// would otherwise overflow the stack while the structure is torn down. A child owned only here
// gives its own children to the work list before it goes, so each destructor sees no items.
Value::~Value() {
  std::vector<Ref> work = std::move(items);
  if (storage) work.push_back(std::move(storage));
  while (!work.empty()) {
    Ref v = std::move(work.back());
    work.pop_back();
    if (v && v.use_count() == 1) {
      for (Ref& c : v->items)
        work.push_back(std::move(c));
      v->items.clear();
      if (v->storage) work.push_back(std::move(v->storage));
    }
  }
}

// Limits a state dict is far inside; a pickle beyond them is refused before it is used.
constexpr std::size_t kMaxValues = 1u << 24;  // values built (a state dict: ~10 per tensor)
constexpr std::int64_t kMaxTensorElements = std::int64_t(1) << 28;  // 1 GiB of float32
constexpr int kMaxDepth = 64;  // containers inside containers (a state dict: ~5)

const char* KindName(Value::Kind k) {
  switch (k) {
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return "a bool";
    case Value::Kind::kInt:
      return "an int";
    case Value::Kind::kFloat:
      return "a float";
    case Value::Kind::kStr:
      return "a string";
    case Value::Kind::kTuple:
      return "a tuple";
    case Value::Kind::kList:
      return "a list";
    case Value::Kind::kDict:
      return "a dict";
    case Value::Kind::kGlobal:
      return "a class";
    case Value::Kind::kStorage:
      return "a storage";
    case Value::Kind::kTensor:
      return "a tensor";
  }
  return "?";
}

// The storage classes of torch.save's persistent ids, and what their elements are.
bool StorageDtype(const std::string& global, torch::ScalarType* out) {
  static const std::unordered_map<std::string, torch::ScalarType> known = {
      {"torch.FloatStorage", torch::kFloat}, {"torch.DoubleStorage", torch::kDouble},
      {"torch.HalfStorage", torch::kHalf},   {"torch.BFloat16Storage", torch::kBFloat16},
      {"torch.ByteStorage", torch::kUInt8},  {"torch.BoolStorage", torch::kBool},
      {"torch.IntStorage", torch::kInt},     {"torch.LongStorage", torch::kLong}};
  const auto it = known.find(global);
  if (it == known.end()) return false;
  *out = it->second;
  return true;
}

// A pickle (protocols 2 to 4) of plain data and tensors. Classes are never instantiated: the
// only callables are OrderedDict() and the two tensor rebuilders, interpreted here.
class Machine {
 public:
  Ref Make(Value::Kind kind) {
    if (++made_ > kMaxValues)
      Fail(fmt::format("more than {} values (no state dict is that large)", kMaxValues));
    auto v = std::make_shared<Value>();
    v->kind = kind;
    return v;
  }

  Machine(const std::string& bytes, std::function<void(const std::string&)> fail)
      : p_(bytes), fail_(std::move(fail)) {}

  Ref Run() {
    while (true) {
      op_at_ = pos_;
      const auto op = static_cast<unsigned char>(Byte());
      switch (op) {
        case 0x80: {  // PROTO
          const int v = Byte();
          if (v < 2 || v > 5) Fail(fmt::format("pickle protocol {} (2 to 5 expected)", v));
          break;
        }
        case 0x95:
          Bytes(8);
          break;   // FRAME: framing only
        case '.':  // STOP
          if (stack_.size() != 1 || !marks_.empty()) Fail("the pickle ends with a malformed stack");
          CheckDepth(stack_.back());
          return stack_.back();
        case 'c': {  // GLOBAL
          const std::string module = Line(), name = Line();
          const std::string g = module + "." + name;
          torch::ScalarType unused;
          if (g != "collections.OrderedDict" && g != "torch._utils._rebuild_tensor_v2" &&
              g != "torch._utils._rebuild_parameter" && !StorageDtype(g, &unused))
            Fail("the pickle refers to " + g + ", which is not part of a state dict");
          auto v = Make(Value::Kind::kGlobal);
          v->s = g;
          Push(v);
          break;
        }
        case 'q':
          Put(static_cast<unsigned char>(Byte()));
          break;  // BINPUT
        case 'r':
          Put(U32());
          break;  // LONG_BINPUT
        case 0x94:
          Put(static_cast<std::uint32_t>(memo_.size()));
          break;  // MEMOIZE
        case 'h':
          Get(static_cast<unsigned char>(Byte()));
          break;  // BINGET
        case 'j':
          Get(U32());
          break;  // LONG_BINGET
        case '(':
          marks_.push_back(stack_.size());
          break;  // MARK
        case ')':
          Push(Make(Value::Kind::kTuple));
          break;     // EMPTY_TUPLE
        case 't': {  // TUPLE
          auto v = Make(Value::Kind::kTuple);
          v->items = PopMark();
          Push(v);
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          const std::size_t k = op - 0x84;
          if (stack_.size() < k + Floor()) Fail("a tuple of more items than the stack holds");
          auto v = Make(Value::Kind::kTuple);
          v->items.assign(stack_.end() - long(k), stack_.end());
          stack_.resize(stack_.size() - k);
          Push(v);
          break;
        }
        case ']':
          Push(Make(Value::Kind::kList));
          break;     // EMPTY_LIST
        case 'a': {  // APPEND
          Ref item = Pop();
          Top(Value::Kind::kList)->items.push_back(item);
          break;
        }
        case 'e': {  // APPENDS
          auto items = PopMark();
          auto& list = Top(Value::Kind::kList)->items;
          list.insert(list.end(), items.begin(), items.end());
          break;
        }
        case '}':
          Push(Make(Value::Kind::kDict));
          break;     // EMPTY_DICT
        case 's': {  // SETITEM
          Ref value = Pop(), key = Pop();
          SetItem(Top(Value::Kind::kDict), key, value);
          break;
        }
        case 'u': {  // SETITEMS
          auto items = PopMark();
          if (items.size() % 2) Fail("SETITEMS with an odd number of items");
          Ref dict = Top(Value::Kind::kDict);
          for (std::size_t i = 0; i < items.size(); i += 2)
            SetItem(dict, items[i], items[i + 1]);
          break;
        }
        case 'N':
          Push(Make(Value::Kind::kNone));
          break;
        case 0x88:
        case 0x89: {  // NEWTRUE, NEWFALSE
          auto v = Make(Value::Kind::kBool);
          v->i = op == 0x88;
          Push(v);
          break;
        }
        case 'K':
          PushInt(static_cast<unsigned char>(Byte()));
          break;     // BININT1
        case 'M': {  // BININT2
          const std::string b = Bytes(2);
          PushInt(static_cast<unsigned char>(b[0]) | (static_cast<unsigned char>(b[1]) << 8));
          break;
        }
        case 'J':
          PushInt(static_cast<std::int32_t>(U32()));
          break;      // BININT
        case 0x8a: {  // LONG1
          const int n = static_cast<unsigned char>(Byte());
          if (n > 8) Fail("an integer of more than 64 bits");
          const std::string b = Bytes(std::size_t(n));
          std::uint64_t u = 0;
          for (int k = n - 1; k >= 0; --k)
            u = (u << 8) | static_cast<unsigned char>(b[std::size_t(k)]);
          if (n > 0 && n < 8 && (static_cast<unsigned char>(b[std::size_t(n - 1)]) & 0x80))
            u |= ~std::uint64_t(0) << (8 * n);  // sign-extend
          PushInt(static_cast<std::int64_t>(u));
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          const std::string b = Bytes(8);
          std::uint64_t u = 0;
          for (char c : b)
            u = (u << 8) | static_cast<unsigned char>(c);
          auto v = Make(Value::Kind::kFloat);
          std::memcpy(&v->f, &u, 8);
          Push(v);
          break;
        }
        case 'X':
          PushStr(Bytes(U32()));
          break;  // BINUNICODE
        case 0x8c:
          PushStr(Bytes(static_cast<unsigned char>(Byte())));
          break;  // SHORT_BINUNICODE
        case 'Q':
          Push(PersistentLoad(Pop()));
          break;     // BINPERSID
        case 'R': {  // REDUCE
          Ref args = Pop(), callable = Pop();
          Push(Reduce(callable, args));
          break;
        }
        case 'b': {  // BUILD: only an OrderedDict's attributes (nn.Module's _metadata)
          Ref state = Pop();
          Top(Value::Kind::kDict);  // the target must be a dict; its attributes are not kept
          if (state->kind != Value::Kind::kDict && state->kind != Value::Kind::kNone)
            Fail(std::string("BUILD of a dict from ") + KindName(state->kind));
          break;
        }
        default:
          Fail(fmt::format("pickle opcode 0x{:02x}, which a state dict does not use", op));
      }
    }
  }

 private:
  [[noreturn]] void Fail(const std::string& what) {
    fail_(fmt::format("data.pkl offset {}: {}", op_at_, what));
    throw std::logic_error("unreachable");
  }
  char Byte() {
    if (pos_ >= p_.size()) Fail("the pickle ends early (no STOP)");
    return p_[pos_++];
  }
  std::string Bytes(std::size_t n) {
    if (n > p_.size() - pos_)
      Fail(fmt::format("{} bytes asked for, {} left in the pickle", n, p_.size() - pos_));
    std::string b = p_.substr(pos_, n);
    pos_ += n;
    return b;
  }
  std::uint32_t U32() {
    const std::string b = Bytes(4);
    std::uint32_t u = 0;
    for (int k = 3; k >= 0; --k)
      u = (u << 8) | static_cast<unsigned char>(b[std::size_t(k)]);
    return u;
  }
  std::string Line() {
    const std::size_t nl = p_.find('\n', pos_);
    if (nl == std::string::npos || nl - pos_ > 256) Fail("a GLOBAL name without its newline");
    std::string s = p_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return s;
  }
  std::size_t Floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void Push(Ref v) { stack_.push_back(std::move(v)); }
  void PushInt(std::int64_t i) {
    auto v = Make(Value::Kind::kInt);
    v->i = i;
    Push(v);
  }
  void PushStr(std::string s) {
    auto v = Make(Value::Kind::kStr);
    v->s = std::move(s);
    Push(v);
  }
  Ref Pop() {
    if (stack_.size() <= Floor()) Fail("an item popped from an empty stack");
    Ref v = stack_.back();
    stack_.pop_back();
    return v;
  }
  // Refuses containers nested deeper than kMaxDepth (walked without recursion; a value reached
  // twice, through the memo, is walked once).
  void CheckDepth(const Ref& top) {
    std::vector<std::pair<const Value*, int>> work = {{top.get(), 1}};
    std::unordered_set<const Value*> seen;
    while (!work.empty()) {
      const auto [v, depth] = work.back();
      work.pop_back();
      if (depth > kMaxDepth)
        Fail(fmt::format("containers nested more than {} deep (a state dict needs about 5)",
                         kMaxDepth));
      if (!seen.insert(v).second) continue;
      for (const Ref& c : v->items)
        if (c) work.emplace_back(c.get(), depth + 1);
    }
  }
  Ref Top(Value::Kind kind) {
    if (stack_.size() <= Floor()) Fail("an empty stack where a container was expected");
    if (stack_.back()->kind != kind)
      Fail(fmt::format("{} where {} was expected", KindName(stack_.back()->kind), KindName(kind)));
    return stack_.back();
  }
  std::vector<Ref> PopMark() {
    if (marks_.empty()) Fail("a MARK was expected");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Ref> items(stack_.begin() + long(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  void Put(std::uint32_t idx) {
    if (stack_.empty()) Fail("memo of an empty stack");
    memo_[idx] = stack_.back();
  }
  void Get(std::uint32_t idx) {
    const auto it = memo_.find(idx);
    if (it == memo_.end()) Fail(fmt::format("memo entry {} read before it was written", idx));
    Push(it->second);
  }
  void SetItem(const Ref& dict, const Ref& key, const Ref& value) {
    if (key->kind == Value::Kind::kStr) {
      const auto [it, fresh] = dict->index.emplace(key->s, dict->items.size());
      if (!fresh) {
        dict->items[it->second + 1] = value;
        return;
      }
    }
    dict->items.push_back(key);
    dict->items.push_back(value);
  }
  // ('storage', <storage class>, key, location, element count)
  Ref PersistentLoad(const Ref& pid) {
    const auto& t = pid->items;
    if (pid->kind != Value::Kind::kTuple || t.size() != 5 || t[0]->kind != Value::Kind::kStr ||
        t[0]->s != "storage" || t[1]->kind != Value::Kind::kGlobal ||
        t[2]->kind != Value::Kind::kStr || t[4]->kind != Value::Kind::kInt)
      Fail("a persistent id that is not ('storage', class, key, location, size)");
    auto v = Make(Value::Kind::kStorage);
    if (!StorageDtype(t[1]->s, &v->dtype)) Fail(t[1]->s + " is not a storage class");
    v->s = t[2]->s;
    v->i = t[4]->i;
    if (v->i < 0) Fail("a storage of negative size");
    return v;
  }
  Ref Reduce(const Ref& callable, const Ref& args) {
    if (callable->kind != Value::Kind::kGlobal || args->kind != Value::Kind::kTuple)
      Fail(std::string("REDUCE of ") + KindName(callable->kind) + " with " + KindName(args->kind));
    const auto& a = args->items;
    if (callable->s == "collections.OrderedDict") {
      if (!a.empty()) Fail("OrderedDict built from arguments");
      return Make(Value::Kind::kDict);
    }
    if (callable->s == "torch._utils._rebuild_parameter") {
      if (a.size() < 2 || a[0]->kind != Value::Kind::kTensor)
        Fail("_rebuild_parameter without a tensor");
      return a[0];
    }
    if (callable->s == "torch._utils._rebuild_tensor_v2") {
      if (a.size() < 4 || a[0]->kind != Value::Kind::kStorage || a[1]->kind != Value::Kind::kInt ||
          a[2]->kind != Value::Kind::kTuple || a[3]->kind != Value::Kind::kTuple)
        Fail("_rebuild_tensor_v2 without (storage, offset, size, stride)");
      auto v = Make(Value::Kind::kTensor);
      v->storage = a[0];
      v->offset = a[1]->i;
      for (int which = 0; which < 2; ++which)
        for (const Ref& e : a[2 + std::size_t(which)]->items) {
          if (e->kind != Value::Kind::kInt) Fail("a tensor size or stride that is not an int");
          (which == 0 ? v->size : v->stride).push_back(e->i);
        }
      if (v->size.size() != v->stride.size() || v->size.size() > 8)
        Fail("a tensor whose size and stride do not match");
      return v;
    }
    Fail("REDUCE of " + callable->s + ", which cannot be called here");
  }

  const std::string& p_;
  std::function<void(const std::string&)> fail_;
  std::size_t pos_ = 0, op_at_ = 0, made_ = 0;
  std::vector<Ref> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint32_t, Ref> memo_;
};

const Ref* Lookup(const Ref& dict, const std::string& key) {
  for (std::size_t i = 0; i < dict->items.size(); i += 2)
    if (dict->items[i]->kind == Value::Kind::kStr && dict->items[i]->s == key)
      return &dict->items[i + 1];
  return nullptr;
}

}  // namespace

TorchSaveContents ReadTorchSave(const std::string& path, const std::string& field) {
  auto fail = [&](const std::string& what) {
    throw core::InputError("import", field, "'" + path + "': " + what);
  };
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  auto record = [&](const std::string& name) {
    try {
      auto [ptr, size] = reader->getRecord(name);
      return std::string(static_cast<const char*>(ptr.get()), size);
    } catch (const c10::Error& e) {
      fail("record '" + name + "' cannot be read (" + e.what_without_backtrace() + ")");
    }
    return std::string();
  };
  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  } catch (const c10::Error& e) {
    std::string why = e.what_without_backtrace();
    why = why.substr(0, why.find('\n'));
    fail("not a readable torch.save archive (" + why + ")");
  }
  if (!reader->hasRecord("data.pkl")) fail("a zip archive without data.pkl (not torch.save?)");
  if (reader->hasRecord("byteorder")) {
    const std::string order = record("byteorder");
    if (order != "little") fail("tensors stored " + order + "-endian (little-endian expected)");
  }
  const std::string pkl = record("data.pkl");
  Machine machine(pkl, fail);
  const Ref top = machine.Run();
  if (top->kind != Value::Kind::kDict)
    fail(std::string("holds ") + KindName(top->kind) + ", not a state dict");

  TorchSaveContents out;
  Ref sd = top;
  if (const Ref* inner = Lookup(top, "model_state_dict")) {
    if ((*inner)->kind != Value::Kind::kDict)
      fail(std::string("'model_state_dict' is ") + KindName((*inner)->kind) + ", not a dict");
    sd = *inner;
    out.key = "model_state_dict";
    if (const Ref* step = Lookup(top, "train_step"))
      if ((*step)->kind == Value::Kind::kInt) out.train_step = (*step)->i;
  }

  std::unordered_map<std::string, torch::Tensor> storages;
  for (std::size_t i = 0; i < sd->items.size(); i += 2) {
    const Ref& key = sd->items[i];
    const Ref& value = sd->items[i + 1];
    if (key->kind != Value::Kind::kStr)
      fail(std::string("a state dict key that is ") + KindName(key->kind) + ", not a name");
    const std::string& name = key->s;
    if (value->kind != Value::Kind::kTensor)
      fail("'" + name + "' is " + KindName(value->kind) + ", not a tensor");
    const Value& st = *value->storage;
    const std::string rec = "data/" + st.s;
    auto it = storages.find(st.s);
    if (it == storages.end()) {
      if (!reader->hasRecord(rec))
        fail("tensor '" + name + "': storage record '" + rec + "' is missing");
      const std::string bytes = record(rec);
      const std::size_t elem = c10::elementSize(st.dtype);
      if (static_cast<std::uint64_t>(st.i) > bytes.size() / elem || bytes.size() != st.i * elem)
        fail(fmt::format(
            "tensor '{}': storage '{}' holds {} bytes, {} elements of {} bytes expected", name, rec,
            bytes.size(), st.i, elem));
      torch::Tensor s = torch::empty({st.i}, torch::TensorOptions().dtype(st.dtype));
      if (!bytes.empty()) std::memcpy(s.data_ptr(), bytes.data(), bytes.size());
      it = storages.emplace(st.s, s).first;
    } else if (it->second.scalar_type() != st.dtype) {
      fail("tensor '" + name + "': storage '" + rec + "' is claimed with two element types");
    }
    // The view must lie inside its storage.
    bool empty = false;
    unsigned __int128 last = static_cast<unsigned __int128>(value->offset);
    if (value->offset < 0) fail("tensor '" + name + "': negative storage offset");
    for (std::size_t k = 0; k < value->size.size(); ++k) {
      if (value->size[k] < 0 || value->stride[k] < 0)
        fail("tensor '" + name + "': negative size or stride");
      if (value->size[k] == 0)
        empty = true;
      else
        last += static_cast<unsigned __int128>(value->size[k] - 1) *
                static_cast<unsigned __int128>(value->stride[k]);
    }
    // A view may repeat its storage's elements (stride 0): its own size is what gets allocated.
    double elements = 1;
    for (const auto n : value->size)
      elements *= double(n);
    if (elements > double(kMaxTensorElements))
      fail(
          fmt::format("tensor '{}': its view (shape [{}]) has {:.0f} elements, more than the {} "
                      "a learner's parameter can have",
                      name, fmt::join(value->size, ", "), elements, kMaxTensorElements));
    // A parameter never repeats its storage's elements: a view with more elements than its
    // storage (a stride-0 broadcast) is not a learner's weight, and would be copied element by
    // element before anything else could be checked.
    if (!empty && elements > double(st.i))
      fail(fmt::format("tensor '{}': its view (shape [{}], strides [{}]) has {:.0f} elements, more "
                       "than the {} of its storage (a repeated view, not a parameter)",
                       name, fmt::join(value->size, ", "), fmt::join(value->stride, ", "),
                       elements, st.i));
    if (!empty && last >= static_cast<unsigned __int128>(st.i))
      fail(
          fmt::format("tensor '{}': its view (offset {}, shape [{}]) runs past its storage of {} "
                      "elements",
                      name, value->offset, fmt::join(value->size, ", "), st.i));
    torch::Tensor t =
        empty ? torch::empty(value->size, torch::TensorOptions().dtype(st.dtype))
              : it->second.as_strided(value->size, value->stride, value->offset).contiguous();
    if (t.is_floating_point()) t = t.to(torch::kFloat).contiguous();
    out.tensors[name] = t.clone();
  }
  if (out.tensors.empty()) fail("the state dict holds no tensors");
  return out;
}

}  // namespace icl::interop
