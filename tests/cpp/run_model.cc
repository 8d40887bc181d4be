// Runs an ONNX model with onnxruntime's C API from C++, with no Python involved: the check that a model
// written by `onnxprobe grad --export` runs "from C++" in stock onnxruntime (tests/test_export_cpp.py).
//
//   run_model LIBONNXRUNTIME MODEL DIR
//
// DIR/inputs.txt has one line per input, "NAME TYPE NDIM D0 D1 ...", TYPE being the ONNX element type
// (1 float, 6 int32, 7 int64, 11 double), and DIR/in_K.bin its raw bytes (K = line number from 0).
// Every output is written the same way: DIR/outputs.txt and DIR/out_K.bin.
//
// The onnxruntime Python wheel ships libonnxruntime.so but no headers, so the few declarations needed
// are written here: the library exports one symbol, OrtGetApiBase; everything else is a function pointer
// in the OrtApi table, at a position that onnxruntime keeps fixed across releases (the table only grows
// at its end). The positions below are those of the public header onnxruntime_c_api.h.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

struct OrtStatus;
struct OrtEnv;
struct OrtSession;
struct OrtSessionOptions;
struct OrtValue;
struct OrtMemoryInfo;
struct OrtAllocator;
struct OrtTensorTypeAndShapeInfo;
struct OrtRunOptions;

typedef const void* const* OrtApiTable;  // the OrtApi struct: a table of function pointers
struct OrtApiBase {
  OrtApiTable (*GetApi)(uint32_t version);
  const char* (*GetVersionString)();
};
typedef const OrtApiBase* (*GetApiBaseFn)();

namespace slot {  // positions in the OrtApi table (fixed since API version 1)
enum : int {
  GetErrorMessage = 2,
  CreateEnv = 3,
  CreateSession = 7,
  Run = 9,
  CreateSessionOptions = 10,
  SetIntraOpNumThreads = 24,
  SessionGetOutputCount = 31,
  SessionGetOutputName = 37,
  CreateTensorWithDataAsOrtValue = 49,
  GetTensorMutableData = 51,
  GetTensorTypeAndShape = 65,
  GetTensorElementType = 60,
  GetDimensionsCount = 61,
  GetDimensions = 62,
  GetTensorShapeElementCount = 64,
  CreateCpuMemoryInfo = 69,
  GetAllocatorWithDefaultOptions = 78,
  AllocatorFree = 76,
  ReleaseEnv = 92,
  ReleaseStatus = 93,
  ReleaseMemoryInfo = 94,
  ReleaseSession = 95,
  ReleaseValue = 96,
  ReleaseTensorTypeAndShapeInfo = 99,
  ReleaseSessionOptions = 100,
};
}

// Every function used here is in version 1 of the API; asking for it works with any onnxruntime.
constexpr uint32_t kApiVersion = 1;
static OrtApiTable api;

template <typename F>
static F fn(int k) {
  return reinterpret_cast<F>(const_cast<void*>(api[k]));
}

static void check(OrtStatus* st, const char* what) {
  if (!st) return;
  const char* msg = fn<const char* (*)(const OrtStatus*)>(slot::GetErrorMessage)(st);
  std::fprintf(stderr, "run_model: %s: %s\n", what, msg);
  fn<void (*)(OrtStatus*)>(slot::ReleaseStatus)(st);
  std::exit(1);
}

static size_t element_size(int type) {
  switch (type) {
    case 1: case 6: return 4;
    case 7: case 11: return 8;
    default: std::fprintf(stderr, "run_model: element type %d not handled\n", type); std::exit(2);
  }
}

static std::vector<char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) { std::fprintf(stderr, "run_model: cannot read %s\n", path.c_str()); std::exit(2); }
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

int main(int argc, char** argv) {
  if (argc != 4) { std::fprintf(stderr, "usage: run_model LIBONNXRUNTIME MODEL DIR\n"); return 2; }
  const std::string dir = argv[3];
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { std::fprintf(stderr, "run_model: %s\n", dlerror()); return 2; }
  auto base_fn = reinterpret_cast<GetApiBaseFn>(dlsym(lib, "OrtGetApiBase"));
  if (!base_fn) { std::fprintf(stderr, "run_model: no OrtGetApiBase in %s\n", argv[1]); return 2; }
  const OrtApiBase* base = base_fn();
  api = base->GetApi(kApiVersion);
  if (!api) { std::fprintf(stderr, "run_model: onnxruntime %s has no API version %d\n", base->GetVersionString(), kApiVersion); return 2; }

  OrtEnv* env = nullptr;
  check(fn<OrtStatus* (*)(int, const char*, OrtEnv**)>(slot::CreateEnv)(3 /* ERROR */, "run_model", &env), "CreateEnv");
  OrtSessionOptions* opts = nullptr;
  check(fn<OrtStatus* (*)(OrtSessionOptions**)>(slot::CreateSessionOptions)(&opts), "CreateSessionOptions");
  check(fn<OrtStatus* (*)(OrtSessionOptions*, int)>(slot::SetIntraOpNumThreads)(opts, 1), "SetIntraOpNumThreads");
  OrtSession* sess = nullptr;
  check(fn<OrtStatus* (*)(const OrtEnv*, const char*, const OrtSessionOptions*, OrtSession**)>(slot::CreateSession)(
            env, argv[2], opts, &sess), "CreateSession");
  OrtAllocator* alloc = nullptr;
  check(fn<OrtStatus* (*)(OrtAllocator**)>(slot::GetAllocatorWithDefaultOptions)(&alloc), "GetAllocatorWithDefaultOptions");
  OrtMemoryInfo* mem = nullptr;
  check(fn<OrtStatus* (*)(int, int, OrtMemoryInfo**)>(slot::CreateCpuMemoryInfo)(1 /* OrtArenaAllocator */, 0 /* default */, &mem),
        "CreateCpuMemoryInfo");

  // inputs
  std::vector<std::string> in_names;
  std::vector<std::vector<char>> in_data;
  std::vector<OrtValue*> in_values;
  std::ifstream spec(dir + "/inputs.txt");
  std::string line;
  for (int k = 0; std::getline(spec, line); ++k) {
    if (line.empty()) continue;
    std::istringstream ss(line);
    std::string name;
    int type = 0, ndim = 0;
    ss >> name >> type >> ndim;
    std::vector<int64_t> dims(ndim);
    for (auto& d : dims) ss >> d;
    in_names.push_back(name);
    in_data.push_back(read_file(dir + "/in_" + std::to_string(k) + ".bin"));
    OrtValue* v = nullptr;
    check(fn<OrtStatus* (*)(const OrtMemoryInfo*, void*, size_t, const int64_t*, size_t, int, OrtValue**)>(
              slot::CreateTensorWithDataAsOrtValue)(mem, in_data.back().data(), in_data.back().size(), dims.data(), dims.size(),
                                                    type, &v), "CreateTensorWithDataAsOrtValue");
    in_values.push_back(v);
  }

  // outputs: every output of the model, in order
  size_t n_out = 0;
  check(fn<OrtStatus* (*)(const OrtSession*, size_t*)>(slot::SessionGetOutputCount)(sess, &n_out), "SessionGetOutputCount");
  std::vector<char*> out_names(n_out);
  for (size_t i = 0; i < n_out; ++i)
    check(fn<OrtStatus* (*)(const OrtSession*, size_t, OrtAllocator*, char**)>(slot::SessionGetOutputName)(sess, i, alloc, &out_names[i]),
          "SessionGetOutputName");
  std::vector<const char*> in_ptrs;
  for (auto& n : in_names) in_ptrs.push_back(n.c_str());
  std::vector<OrtValue*> outs(n_out, nullptr);
  check(fn<OrtStatus* (*)(OrtSession*, const OrtRunOptions*, const char* const*, const OrtValue* const*, size_t, const char* const*,
                          size_t, OrtValue**)>(slot::Run)(sess, nullptr, in_ptrs.data(), in_values.data(), in_values.size(),
                                                          out_names.data(), n_out, outs.data()),
        "Run");

  std::ofstream listing(dir + "/outputs.txt");
  for (size_t i = 0; i < n_out; ++i) {
    OrtTensorTypeAndShapeInfo* info = nullptr;
    check(fn<OrtStatus* (*)(const OrtValue*, OrtTensorTypeAndShapeInfo**)>(slot::GetTensorTypeAndShape)(outs[i], &info), "GetTensorTypeAndShape");
    int type = 0;
    size_t ndim = 0, count = 0;
    check(fn<OrtStatus* (*)(const OrtTensorTypeAndShapeInfo*, int*)>(slot::GetTensorElementType)(info, &type), "GetTensorElementType");
    check(fn<OrtStatus* (*)(const OrtTensorTypeAndShapeInfo*, size_t*)>(slot::GetDimensionsCount)(info, &ndim), "GetDimensionsCount");
    std::vector<int64_t> dims(ndim);
    check(fn<OrtStatus* (*)(const OrtTensorTypeAndShapeInfo*, int64_t*, size_t)>(slot::GetDimensions)(info, dims.data(), ndim), "GetDimensions");
    check(fn<OrtStatus* (*)(const OrtTensorTypeAndShapeInfo*, size_t*)>(slot::GetTensorShapeElementCount)(info, &count),
          "GetTensorShapeElementCount");
    void* data = nullptr;
    check(fn<OrtStatus* (*)(OrtValue*, void**)>(slot::GetTensorMutableData)(outs[i], &data), "GetTensorMutableData");
    std::ofstream(dir + "/out_" + std::to_string(i) + ".bin", std::ios::binary)
        .write(static_cast<const char*>(data), static_cast<std::streamsize>(count * element_size(type)));
    listing << out_names[i] << ' ' << type << ' ' << ndim;
    for (auto d : dims) listing << ' ' << d;
    listing << '\n';
    fn<void (*)(OrtTensorTypeAndShapeInfo*)>(slot::ReleaseTensorTypeAndShapeInfo)(info);
    fn<void (*)(OrtValue*)>(slot::ReleaseValue)(outs[i]);
    check(fn<OrtStatus* (*)(OrtAllocator*, void*)>(slot::AllocatorFree)(alloc, out_names[i]), "AllocatorFree");
  }
  for (auto* v : in_values) fn<void (*)(OrtValue*)>(slot::ReleaseValue)(v);
  fn<void (*)(OrtMemoryInfo*)>(slot::ReleaseMemoryInfo)(mem);
  fn<void (*)(OrtSession*)>(slot::ReleaseSession)(sess);
  fn<void (*)(OrtSessionOptions*)>(slot::ReleaseSessionOptions)(opts);
  fn<void (*)(OrtEnv*)>(slot::ReleaseEnv)(env);
  std::printf("run_model: %zu inputs, %zu outputs, onnxruntime %s\n", in_values.size(), n_out, base->GetVersionString());
  return 0;
}
