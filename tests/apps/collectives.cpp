// Collectives as ProcessGroupNCCL opens them, for a CPU test: each runs inside torch's
// `record_param_comms` operator (RECORD_PARAM_COMMS_DATA: the collective's description in the
// thread's debug info, the operator named at::kParamCommsCallName), with one real operator
// inside it where the communication library's launch would be. collectives.py builds and calls
// it.
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ParamCommsUtils.hpp>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

extern "C" __attribute__((visibility("default"))) int cuproftest_collective(
    const char* collective, int64_t seq, const char* pg_name, const char* pg_desc, int rank,
    int world, int64_t elements, int bf16, int splits) {
  try {
    auto input = at::ones({elements}, bf16 ? at::kBFloat16 : at::kFloat);
    std::vector<at::Tensor> inputs{input};
    std::vector<at::Tensor> outputs{at::empty({elements * world}, input.options())};
    std::vector<int64_t> in_splits, out_splits;
    for (int i = 0; i < splits; ++i) {
      in_splits.push_back(elements / splits);
      out_splits.push_back(elements * world / splits);
    }
    RECORD_PARAM_COMMS_DATA(
        std::make_tuple(seq, false),
        std::make_tuple(std::string(pg_name), std::string(pg_desc)),
        inputs, outputs, rank, collective, elements, elements * world,
        input.scalar_type(), in_splits, out_splits, /*globalRankStart=*/0,
        /*globalRankStride=*/1, world);
    input.add_(1);
    return 0;
  } catch (...) {
    return 1;
  }
}
