// epfuzz cuda backend: write-then-signal between a producer and a consumer on real GPUs.
//
// Producer CTA c (one channel) writes its token slots, chunk by chunk, into the consumer's buffer
// (peer GPU over NVLink, host-mapped pinned memory over PCIe, or the same GPU), then raises the
// channel's flag the way the scenario says (plain / volatile / st.release.sys store, or
// atomicAdd_system), after an optional fence and spin. The consumer (a CTA on the peer GPU, or a
// CPU thread for host memory) acquires the flag, checks every word of the chunk against the
// round's pattern, counts stale words, and acks the round; the producer waits for that ack
// before reusing the slots. One launch runs rounds [r0, r1]; flags, acks and the pattern use the
// global round number, so a run split into several launches is the same protocol. Every spin has
// a clock-based timeout so a lost signal cannot hang the GPU: it sets `err` and returns.
#include <cstdint>

struct MpParams {
  int C, n, W, k, nchunks, sig_kind, fence, sig_last, sync, spin, r0, r1, incant, done_target;
  long long timeout;  // cycles
};

__host__ __device__ __forceinline__ uint32_t mp_pattern(uint32_t r, uint32_t c, uint32_t t, uint32_t w) {
  uint32_t x = r * 0x9E3779B1u ^ (c + 1u) * 0x85EBCA77u ^ (t + 1u) * 0xC2B2AE3Du ^ (w + 1u) * 0x27D4EB2Fu;
  x ^= x >> 15; x *= 0x2C1B3C6Du; x ^= x >> 12;
  return x | 1u;  // never 0: a zero word is poison
}

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint4 ld_volatile_v4(const uint32_t* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}

// The words of tokens [t0, t1) of one channel are one contiguous run. Its 16-byte-aligned middle
// moves as uint4 (DeepEP moves tokens with int4 accesses too), the few words before and after it
// one by one. Word g of the channel is word g % W of token g / W.
struct Span {
  int g0, head, nvec, total;
};

__device__ __forceinline__ Span span_of(const uint32_t* base, int t0, int t1, int W) {
  Span s;
  s.g0 = t0 * W;
  s.total = (t1 - t0) * W;
  const int mis = (int)((reinterpret_cast<uintptr_t>(base + s.g0) >> 2) & 3u);
  s.head = min(s.total, (4 - mis) & 3);
  s.nvec = (s.total - s.head) >> 2;
  return s;
}

// The pattern of the four words from channel word g on (tokens may change inside the four).
__device__ __forceinline__ uint4 pattern4(uint32_t r, int c, int C, int W, int g) {
  int t = g / W, w = g - t * W;
  uint32_t v[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    v[e] = mp_pattern(r, c, t * C + c, w);
    if (++w == W) { w = 0; ++t; }
  }
  return make_uint4(v[0], v[1], v[2], v[3]);
}

__device__ __forceinline__ uint32_t pattern1(uint32_t r, int c, int C, int W, int g) {
  const int t = g / W;
  return mp_pattern(r, c, t * C + c, g - t * W);
}

__global__ void mp_producer(uint32_t* dst, uint32_t* flags, const uint32_t* ack, uint32_t* scratch,
                            uint32_t* done, uint32_t* err, MpParams p) {
  if (*(volatile uint32_t*)err) return;  // an earlier launch timed out: do not wait again
  const int c = blockIdx.x;
  if (c >= p.C) {  // incantation CTA: memory traffic until this launch's producers are done
    uint32_t i = threadIdx.x, x = c;
    long long start = clock64();
    while (*(volatile uint32_t*)done < (uint32_t)p.done_target && clock64() - start < p.timeout) {
      scratch[(i * 16u + x) & ((1u << 20) - 1u)] = x;
      i += blockDim.x * 7u;
      ++x;
    }
    return;
  }
  uint32_t* base = dst + (size_t)c * p.n * p.W;
  uint32_t* flag = flags + c * 32;
  const int sig_tid = p.sig_last ? blockDim.x - 1 : 0;
  __shared__ int abort_;
  if (threadIdx.x == 0) abort_ = 0;
  __syncthreads();
  for (int r = p.r0; r <= p.r1; ++r) {
    if (threadIdx.x == 0) {
      long long start = clock64();
      while (*(volatile const uint32_t*)&ack[c] < (uint32_t)(r - 1)) {
        if (clock64() - start > p.timeout) { atomicExch(err, 1u); abort_ = 1; break; }
      }
    }
    __syncthreads();
    if (abort_) return;
    for (int j = 0; j < p.nchunks; ++j) {
      const Span s = span_of(base, j * p.k, min(p.n, (j + 1) * p.k), p.W);
      for (int o = threadIdx.x; o < s.head; o += blockDim.x) base[s.g0 + o] = pattern1(r, c, p.C, p.W, s.g0 + o);
      for (int q = threadIdx.x; q < s.nvec; q += blockDim.x) {
        const int g = s.g0 + s.head + 4 * q;
        *reinterpret_cast<uint4*>(base + g) = pattern4(r, c, p.C, p.W, g);
      }
      for (int o = s.head + 4 * s.nvec + threadIdx.x; o < s.total; o += blockDim.x)
        base[s.g0 + o] = pattern1(r, c, p.C, p.W, s.g0 + o);
      if (p.sync) __syncthreads();
      if (threadIdx.x == sig_tid) {
        if (p.spin) { long long t = clock64(); while (clock64() - t < p.spin) {} }
        if (p.fence == 1) __threadfence();
        else if (p.fence == 2) __threadfence_system();
        const uint32_t v = (uint32_t)(r - 1) * p.nchunks + j + 1;
        switch (p.sig_kind) {
          case 0: *flag = v; break;
          case 1: *(volatile uint32_t*)flag = v; break;
          case 2: atomicAdd_system(flag, 1u); break;
          default: asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(flag), "r"(v) : "memory"); break;
        }
      }
      __syncthreads();
    }
  }
  if (threadIdx.x == 0) atomicAdd_system(done, 1u);
}

__global__ void mp_consumer(const uint32_t* dst, const uint32_t* flags, uint32_t* ack, uint32_t* stale,
                            unsigned long long* stale_words, uint32_t* err, MpParams p) {
  if (*(volatile uint32_t*)err) return;
  const int c = blockIdx.x;
  const uint32_t* base = dst + (size_t)c * p.n * p.W;
  const uint32_t* flag = flags + c * 32;
  __shared__ uint32_t bad;
  __shared__ int abort_;
  if (threadIdx.x == 0) abort_ = 0;
  for (int r = p.r0; r <= p.r1; ++r) {
    if (threadIdx.x == 0) bad = 0;
    for (int j = 0; j < p.nchunks; ++j) {
      const uint32_t want = (uint32_t)(r - 1) * p.nchunks + j + 1;
      if (threadIdx.x == 0) {
        long long start = clock64();
        while (ld_acquire_sys(flag) < want) {
          if (clock64() - start > p.timeout) { atomicExch(err, 2u); abort_ = 1; break; }
        }
      }
      __syncthreads();
      if (abort_) return;
      const Span s = span_of(base, j * p.k, min(p.n, (j + 1) * p.k), p.W);
      uint32_t local = 0;
      for (int o = threadIdx.x; o < s.head; o += blockDim.x)
        local += *(volatile const uint32_t*)&base[s.g0 + o] != pattern1(r, c, p.C, p.W, s.g0 + o);
      for (int q = threadIdx.x; q < s.nvec; q += blockDim.x) {
        const int g = s.g0 + s.head + 4 * q;
        const uint4 x = ld_volatile_v4(base + g), want4 = pattern4(r, c, p.C, p.W, g);
        local += (x.x != want4.x) + (x.y != want4.y) + (x.z != want4.z) + (x.w != want4.w);
      }
      for (int o = s.head + 4 * s.nvec + threadIdx.x; o < s.total; o += blockDim.x)
        local += *(volatile const uint32_t*)&base[s.g0 + o] != pattern1(r, c, p.C, p.W, s.g0 + o);
      if (local) atomicAdd(&bad, local);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (bad) { atomicAdd(&stale[r - 1], 1u); atomicAdd(stale_words, (unsigned long long)bad); }
      __threadfence_system();
      *(volatile uint32_t*)&ack[c] = (uint32_t)r;
    }
    __syncthreads();
  }
}

void mp_launch_producer(uint32_t* dst, uint32_t* flags, const uint32_t* ack, uint32_t* scratch, uint32_t* done,
                        uint32_t* err, MpParams p, int threads, cudaStream_t s) {
  mp_producer<<<p.C + p.incant, threads, 0, s>>>(dst, flags, ack, scratch, done, err, p);
}

void mp_launch_consumer(const uint32_t* dst, const uint32_t* flags, uint32_t* ack, uint32_t* stale,
                        unsigned long long* stale_words, uint32_t* err, MpParams p, int threads, cudaStream_t s) {
  mp_consumer<<<p.C, threads, 0, s>>>(dst, flags, ack, stale, stale_words, err, p);
}

// With lazy module loading, loading a kernel while another one spins on it can deadlock:
// load both kernels on a device before the first launch.
void mp_preload() {
  cudaFuncAttributes a;
  cudaFuncGetAttributes(&a, mp_producer);
  cudaFuncGetAttributes(&a, mp_consumer);
}
