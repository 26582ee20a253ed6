// Host side of the cuda backend: launches producer and consumer, or runs the CPU consumer for
// host-mapped memory. Pointers come from torch tensors allocated by epfuzz/backends/cuda.py.
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/Sleep.h>
#include <atomic>
#include <string>
#include <thread>
#include <vector>
#include <chrono>
#include <cstdint>

struct MpParams {
  int C, n, W, k, nchunks, sig_kind, fence, sig_last, sync, spin, r0, r1, incant, done_target;
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
// producer's memory) and the kernels -- ours and torch's sleep kernel -- loaded on both devices
// before anything spins.
void prepare(int64_t producer_dev, int64_t consumer_dev) {
  for (int64_t d : {producer_dev, consumer_dev}) {
    c10::cuda::CUDAGuard g(d);
    mp_preload();
    at::cuda::sleep(1);
    C10_CUDA_CHECK(cudaDeviceSynchronize());
    int64_t other = d == producer_dev ? consumer_dev : producer_dev;
    if (other != d) {
      cudaError_t e = cudaDeviceEnablePeerAccess((int)other, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else C10_CUDA_CHECK(e);
    }
  }
}

static MpParams params(const std::vector<int64_t>& v) {
  MpParams p;
  p.C = v[0]; p.n = v[1]; p.W = v[2]; p.k = v[3]; p.nchunks = v[4]; p.sig_kind = v[5]; p.fence = v[6];
  p.sig_last = v[7]; p.sync = v[8]; p.spin = v[9]; p.r0 = v[10]; p.r1 = v[11]; p.incant = v[12];
  p.done_target = v[13]; p.timeout = v[14];
  return p;
}

// How a run of rounds [1, R] is cut into launches: launch i runs rounds [r0, r1], and before it
// the skewed side's stream sleeps `skew` cycles (at::cuda::sleep is what torch.cuda._sleep calls).
struct Launches {
  int per, count;
  Launches(const MpParams& p, int64_t launch_rounds)
      : per(launch_rounds > 0 ? (int)launch_rounds : p.r1), count((p.r1 + per - 1) / per) {}
  MpParams nth(const MpParams& p, int i) const {
    MpParams q = p;
    q.r0 = 1 + i * per;
    q.r1 = std::min(p.r1, (i + 1) * per);
    q.done_target = p.C * (i + 1);
    return q;
  }
};

static void skew_stream(c10::cuda::CUDAStream s, int64_t cycles) {
  if (cycles <= 0) return;
  c10::cuda::CUDAStreamGuard g(s);
  at::cuda::sleep(cycles);
}

#define U32(t) reinterpret_cast<uint32_t*>((t).data_ptr<int32_t>())

// GPU consumer (same GPU or peer GPU): each launch pair in flight at once, then wait for all.
void run_gpu(torch::Tensor dst, torch::Tensor flags, torch::Tensor ack, torch::Tensor scratch, torch::Tensor done,
             torch::Tensor perr, torch::Tensor cerr, torch::Tensor stale, torch::Tensor stale_words,
             int64_t producer_dev, int64_t consumer_dev, std::vector<int64_t> pv, int64_t threads,
             int64_t launch_rounds, int64_t skew, bool skew_consumer) {
  const MpParams p = params(pv);
  const Launches L(p, launch_rounds);
  c10::cuda::CUDAStream cs = c10::cuda::getStreamFromPool(false, consumer_dev);
  c10::cuda::CUDAStream ps = c10::cuda::getStreamFromPool(false, producer_dev);
  for (int i = 0; i < L.count; ++i) {
    const MpParams q = L.nth(p, i);
    {
      c10::cuda::CUDAGuard g(consumer_dev);
      if (skew_consumer) skew_stream(cs, skew);
      mp_launch_consumer(U32(dst), U32(flags), U32(ack), U32(stale),
                         reinterpret_cast<unsigned long long*>(stale_words.data_ptr<int64_t>()), U32(cerr), q,
                         (int)threads, cs.stream());
      C10_CUDA_CHECK(cudaGetLastError());
    }
    {
      c10::cuda::CUDAGuard g(producer_dev);
      if (!skew_consumer) skew_stream(ps, skew);
      mp_launch_producer(U32(dst), U32(flags), U32(ack), U32(scratch), U32(done), U32(perr), q, (int)threads,
                         ps.stream());
      C10_CUDA_CHECK(cudaGetLastError());
    }
  }
  {
    c10::cuda::CUDAGuard g(producer_dev);
    C10_CUDA_CHECK(cudaStreamSynchronize(ps.stream()));
  }
  {
    c10::cuda::CUDAGuard g(consumer_dev);
    C10_CUDA_CHECK(cudaStreamSynchronize(cs.stream()));
  }
}

// CPU consumer for host-mapped pinned memory (the PCIe path). The producer's launches are
// enqueued from a second thread: a full launch queue would otherwise block this thread before
// it starts acking, and the producer would wait for acks that never come.
std::vector<int64_t> run_host(torch::Tensor dst, torch::Tensor flags, torch::Tensor ack, torch::Tensor scratch,
                              torch::Tensor done, torch::Tensor perr, int64_t producer_dev, std::vector<int64_t> pv,
                              int64_t threads, double timeout_s, int64_t launch_rounds, int64_t skew,
                              bool skew_consumer) {
  const MpParams p = params(pv);
  const Launches L(p, launch_rounds);
  uint32_t* d = U32(dst);
  volatile uint32_t* f = U32(flags);
  volatile uint32_t* a = U32(ack);
  c10::cuda::CUDAStream ps = c10::cuda::getStreamFromPool(false, producer_dev);
  int khz = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, (int)producer_dev));
  const double skew_s = skew_consumer ? (double)skew / (khz * 1e3) : 0.0;
  std::string launch_error;
  std::thread launcher([&] {
    try {
      c10::cuda::CUDAGuard g(producer_dev);
      for (int i = 0; i < L.count; ++i) {
        if (!skew_consumer) skew_stream(ps, skew);
        mp_launch_producer(d, U32(flags), U32(ack), U32(scratch), U32(done), U32(perr), L.nth(p, i),
                           (int)threads, ps.stream());
        C10_CUDA_CHECK(cudaGetLastError());
      }
    } catch (const std::exception& e) {
      launch_error = e.what();
    }
  });
  using clock = std::chrono::steady_clock;
  const auto wait = std::chrono::duration<double>(timeout_s);
  int64_t stale_rounds = 0, stale_words = 0, timed_out = 0;
  std::vector<uint32_t> expect((size_t)p.C * p.n * p.W);
  for (int r = 1; r <= p.r1 && !timed_out; ++r) {
    if (skew_s > 0 && (r - 1) % L.per == 0) {
      const auto until = clock::now() + std::chrono::duration<double>(skew_s);
      while (clock::now() < until) {}
    }
    // the round's pattern, computed while the producer writes it: the check is then a compare loop
    for (int c = 0; c < p.C; ++c)
      for (int i = 0; i < p.n; ++i)
        for (int w = 0; w < p.W; ++w)
          expect[((size_t)c * p.n + i) * p.W + w] = mp_pattern_host(r, c, i * p.C + c, w);
    int64_t bad_round = 0;
    for (int c = 0; c < p.C && !timed_out; ++c) {
      const uint32_t* base = d + (size_t)c * p.n * p.W;
      const uint32_t* want_base = expect.data() + (size_t)c * p.n * p.W;
      for (int j = 0; j < p.nchunks; ++j) {
        const uint32_t want = (uint32_t)(r - 1) * p.nchunks + j + 1;
        const auto deadline = clock::now() + wait;
        while (f[c * 32] < want) {
          if (clock::now() > deadline) { timed_out = 1; break; }
        }
        if (timed_out) break;
        // a compiler barrier too: the loads below cannot move above the flag poll or be reused
        // from an earlier round
        std::atomic_thread_fence(std::memory_order_acquire);
        const int t0 = j * p.k, t1 = std::min(p.n, t0 + p.k);
        const size_t lo = (size_t)t0 * p.W, hi = (size_t)t1 * p.W;
        int64_t bad = 0;
        for (size_t x = lo; x < hi; ++x) bad += base[x] != want_base[x];
        bad_round += bad;
        stale_words += bad;
      }
    }
    if (bad_round) ++stale_rounds;
    std::atomic_thread_fence(std::memory_order_release);
    for (int c = 0; c < p.C; ++c) a[c] = (uint32_t)r;
  }
  launcher.join();
  TORCH_CHECK(launch_error.empty(), "producer launch failed: ", launch_error);
  {
    c10::cuda::CUDAGuard g(producer_dev);
    C10_CUDA_CHECK(cudaStreamSynchronize(ps.stream()));
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
