// epfuzz cuda backend: an interpreter of epfuzz.ir.ops, so any protocol runs on GPUs without new kernels.
//
// Producer CTA c (channel c, on GPU0) runs the channel's op list (records built by cuda_prog.py) against
// the consumer's memory (GPU1 over NVLink, or the same GPU): Write = 16-byte vector stores of the epoch's
// self-describing payload (computed here from the epoch: the chunk words, and the trailer CRC by
// linearity of CRC32 from per-slot and per-bit tables made on the host), WriteValue = a flag store made as
// the scenario's gpu.store says, AtomicAdd = atomicAdd_system, WriteImm/Send = the stores a NIC would
// make into the CQ/recv regions, Flush = the fence gpu.fence names (also issued before every signal),
// Spin = a globaltimer spin; on sm_90 a TMA Write = the payload staged in shared memory and stored by
// cp.async.bulk (the async proxy), ProxyFence = the wait for those bulk stores and fence.proxy.async (see
// "TMA bulk stores" below; below sm_90 both stop the producer with error 4, and the host refuses first).
// The consumer (one CTA on GPU1) prepares each epoch (poison, resets, the receiver's own stores),
// releases the producers, then polls the watched regions; whenever they change
// it logs the signal words it saw and, after that, one class byte per slot of the data it may read
// (low nibble: worst class of the body chunks, high nibble: class of the trailer chunk; 0 = this epoch's
// payload, 1 = this epoch's poison, 2 = older, 3 = other). The host runs the protocol's Receiver over
// that log. Every wait has a globaltimer timeout: a lost signal ends the run with an error code (a
// `hang` finding), never a hung GPU. The P_* parameter indices are #defined by cuda_prog.py.

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#define OP_WRITE 1
#define OP_VALUE 2
#define OP_ADD 3
#define OP_IMM 4
#define OP_SEND 5
#define OP_SPIN 6
#define OP_FENCE 7
#define OP_TMA 8
#define OP_PFENCE 9
#define REC 8
#define TMA_STAGE 8192  // bytes per shared-memory staging buffer of a TMA Write; the producer has two
#define MAX_SLOTS 512
#define MAX_WATCH_WORDS 2048
#define CANARY_TAG 0xC0DE0000u

__device__ __forceinline__ u64 gtimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint4 ld_v4(const unsigned char* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ u32 ld_u32(const void* p) { return *(const volatile u32*)p; }

__device__ __forceinline__ uint4 canary4(u32 e) { return make_uint4(CANARY_TAG | (e & 0xFFFFu), 0xFFFFFFFFu, 0xFFFFFFFFu, 0xDEADBEEFu); }

// The expected 16 bytes at byte `off` of the data region in epoch e (unused slots hold poison).
__device__ uint4 payload(const i64* P, const u32* tokcrc, const u32* crcd, const int* tokn, u32 e, i64 off) {
  const int tb = (int)P[P_TOKEN_BYTES], spc = (int)P[P_SPC], C = (int)P[P_C];
  const int s = (int)(off / tb), c = s / spc, i = s - c * spc, j = (int)((off - (i64)s * tb) >> 4);
  if (c >= C || i >= tokn[c]) return canary4(e);
  const u32 w1 = ((u32)P[P_SRC] << 16) | (u32)c, token = (u32)(i * C + c);
  if (j < tb / 16 - 1) return make_uint4(e, w1, token, (u32)j);
  u32 crc = tokcrc[s];
  for (int b = 0; b < 32; ++b)
    if ((e >> b) & 1u) crc ^= crcd[b];
  return make_uint4(e, w1, token, crc);
}

__device__ __forceinline__ int klass(uint4 a, uint4 w, u32 e) {
  if (a.x == w.x && a.y == w.y && a.z == w.z && a.w == w.w) return 0;
  if (a.w == 0xDEADBEEFu && (a.x & 0xFFFF0000u) == CANARY_TAG) return (a.x & 0xFFFFu) == (e & 0xFFFFu) ? 1 : 2;
  return a.x < e ? 2 : 3;
}

__device__ __forceinline__ void fence_kind(int f) {
  if (f == 1) __threadfence();
  else if (f == 2) __threadfence_system();
}

// A flag store of `v` made as gpu.store says: 0 plain, 1 volatile, 2 st.release.sys.
__device__ __forceinline__ void store64(unsigned char* p, u64 v, int mode) {
  if (mode == 0) *(u64*)p = v;
  else if (mode == 1) *(volatile u64*)p = v;
  else asm volatile("st.release.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}

// A CQE, 16 bytes [epoch + 1, value lo, value hi, qp] as the sim writes it, in one vector store.
__device__ __forceinline__ void store_cqe(unsigned char* p, u32 e, u64 v, u32 qp, int mode) {
  if (mode == 2) asm volatile("fence.acq_rel.sys;" ::: "memory");
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};"
               :: "l"(p), "r"(e + 1u), "r"((u32)v), "r"((u32)(v >> 32)), "r"(qp) : "memory");
}

// -- TMA bulk stores (sm_90): Write(tma=True) and ProxyFence, the async proxy of NCCL 3f29db27.
// PTX ISA (8.0 and later), "Data Movement and Conversion Instructions: cp.async.bulk": a bulk copy from
// shared::cta to global memory is an asynchronous operation of the async proxy; with .bulk_group its
// completion is tracked by bulk async-groups, which cp.async.bulk.commit_group closes. "cp.async.bulk.
// wait_group": the executing thread waits until at most N of its most recent bulk async-groups are
// pending and all its earlier ones are complete; with .read only until their reads of the source are
// done (the staging buffer may be reused; the writes may still be in flight). "Memory Consistency Model:
// Proxies" and "membar/fence" (fence.proxy.async): accesses to one location by different proxies need a
// proxy fence between them; fence.proxy.async is the bidirectional fence between the generic and the
// async proxy. So, on the issuing thread, a later generic-proxy release (fence.sc.sys/fence.acq_rel.sys,
// st.release.sys, atom after a fence: the interpreter's Flush and signals) orders the bulk store's
// writes only after (1) cp.async.bulk.wait_group 0 (the writes complete, not .read) and (2)
// fence.proxy.async; without them nothing orders them, which is tma_flag's bug (NCCL-EP hybrid_ep before
// 3f29db27, whose fix is exactly this pair on the issuing thread). The staging is the reverse crossing:
// the threads' generic stores into shared memory are read by the async proxy, so each writer issues
// fence.proxy.async.shared::cta before the barrier that precedes the copy (PTX ISA, cp.async.bulk's
// description of the source operand and the async proxy).
__device__ __forceinline__ void tma_stage_fence() {
#if __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

__device__ __forceinline__ void tma_store(unsigned char* dst, const unsigned char* src, u32 bytes) {
#if __CUDA_ARCH__ >= 900
  const u32 s = (u32)__cvta_generic_to_shared(src);
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(dst), "r"(s), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

// The staging buffer used two bulk copies ago may be rewritten: at most the latest group still reads.
__device__ __forceinline__ void tma_wait_read_but_one() {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
#endif
}

// At an epoch's start, after the consumer's release (go): its poison, generic stores into the slots the
// epoch's bulk stores overwrite, ordered before them for the async proxy too (a write-after-write across
// proxies needs the proxy fence as much as a read does). Before the epoch's first op: it orders nothing
// between the epoch's data and its signals.
__device__ __forceinline__ void proxy_fence_only() {
#if __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async;" ::: "memory");
#endif
}

// ProxyFence: the issuing thread's bulk stores complete, then ordered before its later generic accesses.
__device__ __forceinline__ void proxy_fence() {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  asm volatile("fence.proxy.async;" ::: "memory");
#endif
}

__device__ void write_payload(const i64* P, const u32* tokcrc, const u32* crcd, const int* tokn, u32 e,
                              unsigned char* data, i64 off, i64 len, i64 shift) {
  for (i64 k = threadIdx.x; k < len / 16; k += blockDim.x) {
    const uint4 v = payload(P, tokcrc, crcd, tokn, e, off + shift + 16 * k);
    *reinterpret_cast<uint4*>(data + off + 16 * k) = v;
  }
}

// A TMA Write: the chunk payload staged in shared memory by every thread (TMA_STAGE bytes at a time, two
// buffers in turn), each piece stored by one cp.async.bulk of thread `tid`, the signal thread, so that its
// ProxyFence and its signal's release are the ones that can order them (wait_group counts the executing
// thread's groups only). It always synchronises the CTA, gpu.no_sync or not: the staging needs it.
__device__ void tma_write(const i64* P, const u32* tokcrc, const u32* crcd, const int* tokn, u32 e,
                          unsigned char* data, i64 off, i64 len, i64 shift, unsigned char* stage, int& nbulk,
                          int tid) {
  for (i64 p = 0; p < len; p += TMA_STAGE, ++nbulk) {
    const i64 n = min((i64)TMA_STAGE, len - p);
    unsigned char* buf = stage + (nbulk & 1) * TMA_STAGE;
    if ((int)threadIdx.x == tid) tma_wait_read_but_one();
    __syncthreads();
    for (i64 k = threadIdx.x; k < n / 16; k += blockDim.x)
      reinterpret_cast<uint4*>(buf)[k] = payload(P, tokcrc, crcd, tokn, e, off + p + shift + 16 * k);
    tma_stage_fence();
    __syncthreads();
    if ((int)threadIdx.x == tid) tma_store(data + off + p, buf, (u32)n);
  }
}

// Before every signal and at every Flush: the fence gpu.fence names. A generic-proxy fence: it orders the
// CTA's st stores (with the barrier's cumulativity) but no TMA Write, whose writes are the async proxy's
// until a ProxyFence (NV-async-proxy: what tma_flag's system-scope release leaves unordered).
__device__ __forceinline__ void before_signal(const i64* P, int sig_tid) {
  if (P[P_SYNC]) __syncthreads();
  if ((int)threadIdx.x == sig_tid) {
    if (P[P_SPIN_CYCLES]) { const i64 t = clock64(); while (clock64() - t < P[P_SPIN_CYCLES]) {} }
    fence_kind((int)P[P_FENCE]);
  }
}

extern "C" __global__ void ip_producer(const i64* P, const i64* prog, const u32* tokcrc, const u32* crcd,
                                       const int* tokn, unsigned char* data, unsigned char* sig,
                                       unsigned char* cq, unsigned char* recv, const u32* go, u32* done,
                                       u32* scratch, u32* perr) {
  const int C = (int)P[P_C];
  const i64 r0 = P[P_R0], r1 = P[P_R1], timeout = P[P_TIMEOUT_NS];
  const int c = blockIdx.x;
  if (c >= C) {  // stress CTA: traffic into the consumer's memory until this launch's producers are done
    u32 i = threadIdx.x, x = c;
    const u32 target = (u32)(C * (r1 + 1));
    const u64 start = gtimer();
    while (ld_u32(done) < target && gtimer() - start < (u64)timeout) {
      for (int k = 0; k < 64; ++k) { scratch[(i * 16u + x) & ((1u << 20) - 1u)] = x; i += blockDim.x * 7u; ++x; }
    }
    return;
  }
  unsigned char* region[4] = {data, sig, cq, recv};
  const int sig_tid = P[P_SIG_LAST] ? blockDim.x - 1 : 0;
  const int mode = (int)P[P_STORE];
  const int nops = (int)P[P_NOPS];
  __shared__ int abort_;
#if __CUDA_ARCH__ >= 900
  __shared__ __align__(128) unsigned char stage[2 * TMA_STAGE];  // cp.async.bulk: 16-byte aligned source
#endif
  int nbulk = 0;  // bulk copies issued so far (every thread counts them alike: which buffer is next)
  bool tma = false;
  for (int k = 0; k < nops; ++k) tma = tma || prog[((i64)c * nops + k) * REC] == OP_TMA;
  for (i64 r = r0; r <= r1; ++r) {
    const u32 e = (u32)r;
    if (threadIdx.x == 0) {
      abort_ = 0;
      const u64 start = gtimer();
      while (ld_u32(go) < e + 1u) {
        if (gtimer() - start > (u64)timeout) { atomicExch(perr, 1u); abort_ = 1; break; }
      }
    }
    __syncthreads();
    if (abort_) return;
    if (tma && (int)threadIdx.x == sig_tid) proxy_fence_only();
    const i64* op = prog + (i64)c * nops * REC;
    for (int k = 0; k < nops && op[0] != 0; ++k, op += REC) {
      const int code = (int)op[0];
      unsigned char* base = region[op[1] & 3];
      const i64 off = op[2], len = op[3];
      const u64 v = (u64)op[4] + (u64)op[5] * (u64)r;
      if (code == OP_WRITE || (code == OP_IMM && len > 0)) write_payload(P, tokcrc, crcd, tokn, e, base, off, len, code == OP_WRITE ? op[6] : 0);
      if (code == OP_WRITE) continue;
      if (code == OP_TMA || code == OP_PFENCE) {
#if __CUDA_ARCH__ >= 900
        if (code == OP_TMA) tma_write(P, tokcrc, crcd, tokn, e, base, off, len, op[6], stage, nbulk, sig_tid);
        else if ((int)threadIdx.x == sig_tid) proxy_fence();
        continue;
#else
        if (threadIdx.x == 0) atomicExch(perr, 4u);  // no async proxy below sm_90: never a st in its place
        return;
#endif
      }
      if (code == OP_SPIN) {
        if (threadIdx.x == 0) { const u64 t = gtimer(); while (gtimer() - t < v) {} }
        __syncthreads();
        continue;
      }
      before_signal(P, sig_tid);
      if ((int)threadIdx.x == sig_tid) {
        if (code == OP_VALUE) store64(base + off, v, mode);
        else if (code == OP_ADD) atomicAdd_system(reinterpret_cast<u64*>(base + off), v);
        else if (code == OP_IMM) store_cqe(cq + op[6], e, v, (u32)op[7], mode);
        else if (code == OP_SEND) { store64(recv + off, v, mode); store_cqe(cq + op[6], e, v, (u32)op[7], mode); }
      }
      __syncthreads();
    }
    // no bulk store of this epoch outlives it (nor reads a staging buffer the next epoch rewrites); the
    // epoch's signals were sent before this, so it orders nothing the receiver judges
    if (nbulk && (int)threadIdx.x == sig_tid) proxy_fence();
    __syncthreads();
    if (threadIdx.x == 0) { __threadfence_system(); atomicAdd_system(done, 1u); }
  }
}

// Read the watched words (signal, then CQ and recv when copied) into shared `w`; true if any changed.
__device__ bool read_watch(const i64* P, const unsigned char* sig, const unsigned char* cq,
                           const unsigned char* recv, u32* w, int* changed) {
  const int ns = (int)P[P_SIG_BYTES] / 4, nq = P[P_COPY_CQ] ? (int)P[P_CQ_BYTES] / 4 : 0;
  if (threadIdx.x == 0) *changed = 0;
  __syncthreads();
  for (int k = threadIdx.x; k < ns + 2 * nq; k += blockDim.x) {
    const unsigned char* p = k < ns ? sig + 4 * k : (k < ns + nq ? cq + 4 * (k - ns) : recv + 4 * (k - ns - nq));
    const u32 x = ld_u32(p);
    if (x != w[k]) { w[k] = x; *changed = 1; }
  }
  __syncthreads();
  const bool out = *changed != 0;
  __syncthreads();  // everyone has read it before the next call resets it
  return out;
}

// One class byte per slot into shared `cls` (see the file comment); true if any byte changed.
__device__ bool classify_slots(const i64* P, const u32* tokcrc, const u32* crcd, const int* tokn,
                               const unsigned char* data, u32 e, u32* body, u32* tail, unsigned char* cls,
                               int* changed) {
  const int tb = (int)P[P_TOKEN_BYTES], nslots = (int)P[P_NSLOTS], per = tb / 16;
  for (int s = threadIdx.x; s < nslots; s += blockDim.x) { body[s] = 0; tail[s] = 0; }
  if (threadIdx.x == 0) *changed = 0;
  __syncthreads();
  for (i64 k = threadIdx.x; k < (i64)nslots * per; k += blockDim.x) {
    const int s = (int)(k / per), j = (int)(k - (i64)s * per);
    const uint4 a = ld_v4(data + 16 * k), want = payload(P, tokcrc, crcd, tokn, e, 16 * k);
    const u32 kl = (u32)klass(a, want, e);
    if (kl) atomicMax(j == per - 1 ? &tail[s] : &body[s], kl);
  }
  __syncthreads();
  for (int s = threadIdx.x; s < nslots; s += blockDim.x) {
    const unsigned char b = (unsigned char)(body[s] | (tail[s] << 4));
    if (b != cls[s]) { cls[s] = b; *changed = 1; }
  }
  __syncthreads();
  const bool out = *changed != 0;
  __syncthreads();
  return out;
}

struct Shared {
  u32 w[MAX_WATCH_WORDS];
  u32 body[MAX_SLOTS], tail[MAX_SLOTS];
  unsigned char cls[MAX_SLOTS];
  int changed, flag;
};

// Before epoch e: poison, resets and the receiver's ordered stores, then release the producers (go),
// then its unordered stores, which race the epoch. `w`/`cls` end holding what the receiver sees first.
__device__ void prepare(const i64* P, const i64* prolog, const u32* tokcrc, const u32* crcd, const int* tokn,
                        unsigned char* data, unsigned char* sig, unsigned char* cq, unsigned char* recv,
                        u32* go, u32 e, Shared& sh) {
  unsigned char* region[4] = {data, sig, cq, recv};
  if (P[P_POISON] || e == 0)
    for (i64 k = threadIdx.x; k < P[P_DATA_BYTES] / 16; k += blockDim.x)
      *reinterpret_cast<uint4*>(data + 16 * k) = canary4(e);
  if (P[P_RESET] || e == 0) {
    for (i64 k = threadIdx.x; k < P[P_SIG_BYTES] / 4; k += blockDim.x) ((u32*)sig)[k] = 0;
    for (i64 k = threadIdx.x; k < P[P_CQ_BYTES] / 4; k += blockDim.x) { ((u32*)cq)[k] = 0; ((u32*)recv)[k] = 0; }
  }
  const int npro = e == 0 ? 0 : (int)P[P_NPROLOG];
  __syncthreads();
  if (threadIdx.x == 0)
    for (int k = 0; k < npro; ++k)
      if (prolog[4 * k + 3]) *(volatile u64*)(region[prolog[4 * k] & 3] + prolog[4 * k + 1]) = (u64)prolog[4 * k + 2];
  __threadfence();
  __syncthreads();
  for (int k = threadIdx.x; k < MAX_WATCH_WORDS; k += blockDim.x) sh.w[k] = 0xA5A5A5A5u;
  for (int s = threadIdx.x; s < MAX_SLOTS; s += blockDim.x) sh.cls[s] = 0xFF;
  __syncthreads();
  read_watch(P, sig, cq, recv, sh.w, &sh.changed);
  if (P[P_WATCH] & 1) classify_slots(P, tokcrc, crcd, tokn, data, e, sh.body, sh.tail, sh.cls, &sh.changed);
  if (threadIdx.x == 0) {
    __threadfence_system();
    *(volatile u32*)go = e + 1u;
    for (int k = 0; k < npro; ++k)
      if (!prolog[4 * k + 3]) *(volatile u64*)(region[prolog[4 * k] & 3] + prolog[4 * k + 1]) = (u64)prolog[4 * k + 2];
  }
  __syncthreads();
}

// Is what the receiver sees the epoch's final image (signal words, and the data when it is watched)?
__device__ bool at_final(const i64* P, const u64* final0, const u64* fstep, u32 e, Shared& sh) {
  const int nw = ((int)P[P_SIG_BYTES] + (P[P_COPY_CQ] ? 2 * (int)P[P_CQ_BYTES] : 0)) / 8;
  if (threadIdx.x == 0) sh.flag = 1;
  __syncthreads();
  for (int k = threadIdx.x; k < nw; k += blockDim.x) {
    const u64 got = (u64)sh.w[2 * k] | ((u64)sh.w[2 * k + 1] << 32);
    if (got != final0[k] + fstep[k] * (u64)e) sh.flag = 0;
  }
  if (P[P_WATCH] & 1)
    for (int s = threadIdx.x; s < (int)P[P_NSLOTS]; s += blockDim.x)
      if (sh.cls[s]) sh.flag = 0;
  __syncthreads();
  const bool out = sh.flag != 0;
  __syncthreads();
  return out;
}

__device__ __forceinline__ int watch_words(const i64* P) {
  return ((int)P[P_SIG_BYTES] + (P[P_COPY_CQ] ? 2 * (int)P[P_CQ_BYTES] : 0)) / 4;
}

__device__ void log_words(const i64* P, unsigned char* entry, const Shared& sh) {
  for (int k = threadIdx.x; k < watch_words(P); k += blockDim.x) ((u32*)entry)[k] = sh.w[k];
}

__device__ void log_classes(const i64* P, unsigned char* entry, const Shared& sh) {
  unsigned char* out = entry + 4 * watch_words(P);
  for (int s = threadIdx.x; s < (int)P[P_NSLOTS]; s += blockDim.x) out[s] = sh.cls[s];
}

extern "C" __global__ void ip_consumer(const i64* P, const i64* prolog, const u32* tokcrc, const u32* crcd,
                                       const int* tokn, unsigned char* data, unsigned char* sig,
                                       unsigned char* cq, unsigned char* recv, u32* go, const u32* done,
                                       const u64* final0, const u64* fstep, unsigned char* log, int* nent,
                                       u32* cerr) {
  __shared__ Shared sh;
  const i64 r0 = P[P_R0], r1 = P[P_R1], timeout = P[P_TIMEOUT_NS];
  const int C = (int)P[P_C], maxe = (int)P[P_MAX_ENTRIES], eb = (int)P[P_ENTRY_BYTES];
  const bool early = P[P_EARLY] != 0, data_watched = (P[P_WATCH] & 1) != 0;
  bool prepared = false;
  for (i64 r = r0; r <= r1; ++r) {
    const u32 e = (u32)r;
    if (!prepared) prepare(P, prolog, tokcrc, crcd, tokn, data, sig, cq, recv, go, e, sh);
    prepared = false;
    int n = 0;
    const u64 start = gtimer();
    for (;;) {
      bool ch = read_watch(P, sig, cq, recv, sh.w, &sh.changed);
      if (data_watched)
        ch = classify_slots(P, tokcrc, crcd, tokn, data, e, sh.body, sh.tail, sh.cls, &sh.changed) || ch;
      const bool fin = at_final(P, final0, fstep, e, sh);
      if (ch) {
        unsigned char* entry = log + ((r - r0) * (i64)maxe + min(n, maxe - 1)) * eb;
        if (n < maxe) log_words(P, entry, sh);
        __syncthreads();
        if (fin && early && r < r1) {  // the credit goes back at the accept: the next epoch races the read
          prepare(P, prolog, tokcrc, crcd, tokn, data, sig, cq, recv, go, e + 1u, sh);
          prepared = true;
        }
        // the snapshot: the data the receiver may read, taken after the signal words
        classify_slots(P, tokcrc, crcd, tokn, data, e, sh.body, sh.tail, sh.cls, &sh.changed);
        if (n < maxe) log_classes(P, entry, sh);
        ++n;
      }
      if (fin) break;
      if (gtimer() - start > (u64)timeout) {
        if (threadIdx.x == 0) { atomicExch(cerr, 2u); nent[r - r0] = n; }
        return;
      }
    }
    if (threadIdx.x == 0) {
      nent[r - r0] = n;
      const u64 t = gtimer();
      while (ld_u32(done) < (u32)(C * (r + 1))) {
        if (gtimer() - t > (u64)timeout) { atomicExch(cerr, 3u); break; }
      }
      sh.flag = ld_u32(cerr) != 0;
    }
    __syncthreads();
    if (sh.flag) return;
    __syncthreads();
  }
}
