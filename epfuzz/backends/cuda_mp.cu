// epfuzz cuda backend: write-then-signal between a producer and a consumer on real GPUs.
//
// Producer CTA c (one channel) writes its token slots, chunk by chunk, into the consumer's buffer
// (peer GPU over NVLink, host-mapped pinned memory over PCIe, or the same GPU), then raises the
// channel's flag the way the scenario says (plain / volatile / st.release.sys store, or
// atomicAdd_system), after an optional fence and spin. The consumer (a CTA on the peer GPU, or a
// CPU thread for host memory) acquires the flag, checks every word of the chunk against the
// round's pattern, counts stale words, and acks the round; the producer waits for that ack
// before reusing the slots. Every spin has a clock-based timeout so a lost signal cannot hang the
// GPU: it sets `err` and returns.
#include <cstdint>

struct MpParams {
  int C, n, W, k, nchunks, sig_kind, fence, sig_last, sync, spin, rounds, incant;
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

__global__ void mp_producer(uint32_t* dst, uint32_t* flags, const uint32_t* ack, uint32_t* scratch,
                            uint32_t* done, uint32_t* err, MpParams p) {
  const int c = blockIdx.x;
  if (c >= p.C) {  // incantation CTA: memory traffic until the producers are done
    uint32_t i = threadIdx.x, x = c;
    long long start = clock64();
    while (*(volatile uint32_t*)done < (uint32_t)p.C && clock64() - start < p.timeout) {
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
  for (int r = 1; r <= p.rounds; ++r) {
    if (threadIdx.x == 0) {
      long long start = clock64();
      while (*(volatile const uint32_t*)&ack[c] < (uint32_t)(r - 1)) {
        if (clock64() - start > p.timeout) { atomicExch(err, 1u); abort_ = 1; break; }
      }
    }
    __syncthreads();
    if (abort_) return;
    for (int j = 0; j < p.nchunks; ++j) {
      const int t0 = j * p.k, t1 = min(p.n, t0 + p.k);
      for (int idx = threadIdx.x; idx < (t1 - t0) * p.W; idx += blockDim.x) {
        const int i = t0 + idx / p.W, w = idx % p.W;
        base[(size_t)i * p.W + w] = mp_pattern(r, c, i * p.C + c, w);
      }
      if (p.sync) __syncthreads();
      if (threadIdx.x == sig_tid) {
        if (p.spin) { long long s = clock64(); while (clock64() - s < p.spin) {} }
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
  const int c = blockIdx.x;
  const uint32_t* base = dst + (size_t)c * p.n * p.W;
  const uint32_t* flag = flags + c * 32;
  __shared__ uint32_t bad;
  __shared__ int abort_;
  if (threadIdx.x == 0) abort_ = 0;
  for (int r = 1; r <= p.rounds; ++r) {
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
      const int t0 = j * p.k, t1 = min(p.n, t0 + p.k);
      uint32_t local = 0;
      for (int idx = threadIdx.x; idx < (t1 - t0) * p.W; idx += blockDim.x) {
        const int i = t0 + idx / p.W, w = idx % p.W;
        const uint32_t x = *(volatile const uint32_t*)&base[(size_t)i * p.W + w];
        local += x != mp_pattern(r, c, i * p.C + c, w);
      }
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
