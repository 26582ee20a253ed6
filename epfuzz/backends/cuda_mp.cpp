// Host side of the cuda backend: launches producer and consumer, or runs the CPU consumer for
// host-mapped memory. Pointers come from torch tensors allocated by epfuzz/backends/cuda.py.
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <atomic>
#include <chrono>
#include <cstdint>

struct MpParams {
  int C, n, W, k, nchunks, sig_kind, fence, sig_last, sync, spin, rounds, incant;
  long long timeout;
};
uint32_t mp_pattern_host(uint32_t r, uint32_t c, uint32_t t, uint32_t w) {
  uint32_t x = r * 0x9E3779B1u ^ (c + 1u) * 0x85EBCA77u ^ (t + 1u) * 0xC2B2AE3Du ^ (w + 1u) * 0x27D4EB2Fu;
  x ^= x >> 15; x *= 0x2C1B3C6Du; x ^= x >> 12;
  return x | 1u;
}
void mp_launch_producer(uint32_t*, uint32_t*, const uint32_t*, uint32_t*, uint32_t*, uint32_t*, MpParams, int,
                        cudaStream_t);
void mp_launch_consumer(const uint32_t*, const uint32_t*, uint32_t*, uint32_t*, unsigned long long*, uint32_t*,
                        MpParams, int, cudaStream_t);

void mp_preload();

// Peer access both ways (the producer writes the consumer's buffer, the consumer acks into the
// producer's memory) and the kernels loaded on both devices before anything spins.
void prepare(int64_t producer_dev, int64_t consumer_dev) {
  for (int64_t d : {producer_dev, consumer_dev}) {
    c10::cuda::CUDAGuard g(d);
    mp_preload();
    C10_CUDA_CHECK(cudaGetLastError());
    int64_t other = d == producer_dev ? consumer_dev : producer_dev;
    if (other != d) {
      cudaError_t e = cudaDeviceEnablePeerAccess((int)other, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else C10_CUDA_CHECK(e);
    }
  }
}

static MpParams params(std::vector<int64_t> v) {
  MpParams p;
  p.C = v[0]; p.n = v[1]; p.W = v[2]; p.k = v[3]; p.nchunks = v[4]; p.sig_kind = v[5]; p.fence = v[6];
  p.sig_last = v[7]; p.sync = v[8]; p.spin = v[9]; p.rounds = v[10]; p.incant = v[11]; p.timeout = v[12];
  return p;
}
#define U32(t) reinterpret_cast<uint32_t*>((t).data_ptr<int32_t>())

// GPU consumer (same GPU or peer GPU): both kernels in flight at once, then wait for both.
void run_gpu(torch::Tensor dst, torch::Tensor flags, torch::Tensor ack, torch::Tensor scratch, torch::Tensor done,
             torch::Tensor perr, torch::Tensor cerr, torch::Tensor stale, torch::Tensor stale_words,
             int64_t producer_dev, int64_t consumer_dev, std::vector<int64_t> pv, int64_t threads) {
  MpParams p = params(pv);
  cudaStream_t ps, cs;
  {
    c10::cuda::CUDAGuard g(consumer_dev);
    cs = c10::cuda::getStreamFromPool(false, consumer_dev).stream();
    mp_launch_consumer(U32(dst), U32(flags), U32(ack), U32(stale),
                       reinterpret_cast<unsigned long long*>(stale_words.data_ptr<int64_t>()), U32(cerr), p,
                       threads, cs);
    C10_CUDA_CHECK(cudaGetLastError());
  }
  {
    c10::cuda::CUDAGuard g(producer_dev);
    ps = c10::cuda::getStreamFromPool(false, producer_dev).stream();
    mp_launch_producer(U32(dst), U32(flags), U32(ack), U32(scratch), U32(done), U32(perr), p, threads, ps);
    C10_CUDA_CHECK(cudaGetLastError());
  }
  {
    c10::cuda::CUDAGuard g(producer_dev);
    C10_CUDA_CHECK(cudaStreamSynchronize(ps));
  }
  {
    c10::cuda::CUDAGuard g(consumer_dev);
    C10_CUDA_CHECK(cudaStreamSynchronize(cs));
  }
}

// CPU consumer for host-mapped pinned memory (the PCIe path).
std::vector<int64_t> run_host(torch::Tensor dst, torch::Tensor flags, torch::Tensor ack, torch::Tensor scratch,
                              torch::Tensor done, torch::Tensor perr, int64_t producer_dev, std::vector<int64_t> pv,
                              int64_t threads, double timeout_s) {
  MpParams p = params(pv);
  uint32_t* d = U32(dst);
  volatile uint32_t* f = U32(flags);
  volatile uint32_t* a = U32(ack);
  cudaStream_t ps;
  {
    c10::cuda::CUDAGuard g(producer_dev);
    ps = c10::cuda::getStreamFromPool(false, producer_dev).stream();
    mp_launch_producer(d, U32(flags), U32(ack), U32(scratch), U32(done), U32(perr), p, threads, ps);
    C10_CUDA_CHECK(cudaGetLastError());
  }
  int64_t stale_rounds = 0, stale_words = 0, timed_out = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (int r = 1; r <= p.rounds && !timed_out; ++r) {
    int64_t bad_round = 0;
    for (int c = 0; c < p.C && !timed_out; ++c) {
      volatile uint32_t* base = d + (size_t)c * p.n * p.W;
      for (int j = 0; j < p.nchunks; ++j) {
        uint32_t want = (uint32_t)(r - 1) * p.nchunks + j + 1;
        while (f[c * 32] < want) {
          if (std::chrono::steady_clock::now() > deadline) { timed_out = 1; break; }
        }
        if (timed_out) break;
        std::atomic_thread_fence(std::memory_order_acquire);
        int t0 = j * p.k, t1 = std::min(p.n, t0 + p.k);
        for (int i = t0; i < t1; ++i)
          for (int w = 0; w < p.W; ++w)
            if (base[(size_t)i * p.W + w] != mp_pattern_host(r, c, i * p.C + c, w)) { ++bad_round; ++stale_words; }
      }
    }
    if (bad_round) ++stale_rounds;
    std::atomic_thread_fence(std::memory_order_release);
    for (int c = 0; c < p.C; ++c) a[c] = (uint32_t)r;
  }
  {
    c10::cuda::CUDAGuard g(producer_dev);
    C10_CUDA_CHECK(cudaStreamSynchronize(ps));
  }
  return {stale_rounds, stale_words, timed_out};
}

bool host_atomics(int64_t dev) {
  int v = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrHostNativeAtomicSupported, (int)dev));
  return v != 0;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("host_atomics", &host_atomics);
  m.def("prepare", &prepare);
  m.def("run_gpu", &run_gpu);
  m.def("run_host", &run_host);
}
