/* gloo_shim.cc -- Gloo (Debian's libgloo) behind the extern "C" functions of
 * gloo_shim.h: the project's only C++, built as the module comm_gloo.c
 * dlopens (fabricscript-gloo.so).
 *
 * Invariant: no exception crosses the C boundary; a failed call returns -1
 * (NULL) with Gloo's message in err.  Gloo's own rendezvous
 * (connectFullMesh) needs a key-value store, and this Gloo has no TCPStore:
 * ExchangeStore is one over the project's rendezvous (rendezvous.c), whose
 * allgather carries every rank's keys of one kind at once.  The other half,
 * the fsCC_ops table on top of these functions, is comm_gloo.c. */
#include "gloo_shim.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {

/* connectFullMesh has every rank set keys of the same kinds in the same
 * order, each kind with the rank's number at its end ("rank_3" its host
 * name, "3" its pair addresses), and only then read the others' keys of that
 * kind.  So each set() is a collective round: one exchange of fixed-size
 * records {ok, length, value}, kept under the key's kind.  A rank whose
 * device failed publishes ok = 0, and its peers fail in get(). */
class ExchangeStore : public gloo::rendezvous::Store {
 public:
  ExchangeStore(int rank, int world, fsCC_gloo_exchange exchange, void *arg)
      : rank_(rank), world_(world), exchange_(exchange), arg_(arg),
        slot_(kHead + kHostName + (size_t)(world > 1 ? world - 1 : 1) * gloo::transport::Address::kMaxByteSize) {}

  void set(const std::string &key, const std::vector<char> &value) override {
    if (rank_of(key) != rank_) throw std::logic_error("gloo store: a rank set another rank's key " + key);
    publish(kind_of(key), true, value);
  }

  std::vector<char> get(const std::string &key) override {
    int r = rank_of(key);
    auto round = rounds_.find(kind_of(key));
    if (round == rounds_.end() || r < 0 || r >= world_) throw std::logic_error("gloo store: no key " + key);
    const char *rec = round->second.data() + (size_t)r * slot_;
    if (!rec[0]) throw std::runtime_error("rank " + std::to_string(r) + " could not open its gloo device");
    uint32_t n;
    std::memcpy(&n, rec + 1, sizeof n);
    return std::vector<char>(rec + kHead, rec + kHead + n);
  }

  /* set() was collective: once it returned, every key of its kind is here */
  void wait(const std::vector<std::string> &) override {}
  void wait(const std::vector<std::string> &, const std::chrono::milliseconds &) override {}

  /* For a rank that failed before connectFullMesh could set a key. */
  void publish_failure() {
    if (rounds_.empty()) publish("", false, {});
  }

  struct ExchangeFailed {}; /* the rendezvous's message is the caller's (fsT_error) */

 private:
  static constexpr size_t kHead = 1 + sizeof(uint32_t);
  static constexpr size_t kHostName = 256;

  /* the number at the key's end; -1 if none */
  static int rank_of(const std::string &key) {
    size_t at = key.find_last_not_of("0123456789") + 1; /* npos + 1 == 0 */
    return at < key.size() && key.size() - at < 6 ? std::stoi(key.substr(at)) : -1;
  }

  static std::string kind_of(const std::string &key) {
    return key.substr(0, key.find_last_not_of("0123456789") + 1);
  }

  void publish(const std::string &kind, bool ok, const std::vector<char> &value) {
    if (rounds_.count(kind)) throw std::logic_error("gloo store: a second key of kind \"" + kind + "\"");
    if (value.size() > slot_ - kHead) throw std::length_error("gloo store: a value too long");
    std::vector<char> mine(slot_, 0);
    uint32_t n = (uint32_t)value.size();
    mine[0] = ok;
    std::memcpy(mine.data() + 1, &n, sizeof n);
    if (n) std::memcpy(mine.data() + kHead, value.data(), n);
    std::vector<char> &all = rounds_[kind]; /* tried: never again, even when the exchange failed */
    all.assign(slot_ * (size_t)world_, 0);
    if (exchange_(arg_, mine.data(), all.data(), slot_) < 0) throw ExchangeFailed();
  }

  int rank_, world_;
  fsCC_gloo_exchange exchange_;
  void *arg_;
  size_t slot_;
  std::map<std::string, std::vector<char>> rounds_;
};

}  // namespace

struct fsCC_glooshim {
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::chrono::milliseconds timeout;
  /* each rank's pair addresses as Gloo prints them in its messages */
  std::vector<std::vector<std::string>> addresses;
};

namespace {

void say(char *err, const std::string &what) { std::snprintf(err, FSCC_GLOO_ERR, "%s", what.c_str()); }


/* Element-wise reductions for Gloo's ring: c = a op b.  max and min
 * propagate NaN, as the shm transport does; int64 sums wrap. */
template <typename T>
void reduce_sum(void *c, const void *a, const void *b, size_t n) {
  T *o = static_cast<T *>(c);
  const T *x = static_cast<const T *>(a), *y = static_cast<const T *>(b);
  for (size_t i = 0; i < n; i++) {
    if constexpr (std::is_same<T, int64_t>::value)
      o[i] = (T)((uint64_t)x[i] + (uint64_t)y[i]);
    else
      o[i] = x[i] + y[i];
  }
}

template <typename T>
void reduce_max(void *c, const void *a, const void *b, size_t n) {
  T *o = static_cast<T *>(c);
  const T *x = static_cast<const T *>(a), *y = static_cast<const T *>(b);
  for (size_t i = 0; i < n; i++) o[i] = (x[i] != x[i] || x[i] > y[i]) ? x[i] : y[i];
}

template <typename T>
void reduce_min(void *c, const void *a, const void *b, size_t n) {
  T *o = static_cast<T *>(c);
  const T *x = static_cast<const T *>(a), *y = static_cast<const T *>(b);
  for (size_t i = 0; i < n; i++) o[i] = (x[i] != x[i] || x[i] < y[i]) ? x[i] : y[i];
}

template <typename T>
gloo::AllreduceOptions::Func reduction(fsCC_gloo_red red) {
  return red == FSCC_GLOO_SUM ? reduce_sum<T> : red == FSCC_GLOO_MAX ? reduce_max<T> : reduce_min<T>;
}

template <typename T>
void all_reduce(fsCC_glooshim *g, T *buf, size_t count, fsCC_gloo_red red) {
  gloo::AllreduceOptions o(g->context);
  o.setOutput(buf, count);
  o.setReduceFunction(reduction<T>(red));
  o.setTimeout(g->timeout);
  gloo::allreduce(o);
}

}  // namespace

extern "C" fsCC_glooshim *fsCC_glooshim_open(int rank, int world, const char *host, const char *iface,
                                             long timeout_ms, fsCC_gloo_exchange exchange, void *arg,
                                             char *err) {
  ExchangeStore store(rank, world, exchange, arg);
  fsCC_glooshim *g = nullptr;
  try {
    g = new fsCC_glooshim;
    g->timeout = std::chrono::milliseconds(timeout_ms);
    gloo::transport::tcp::attr attr;
    if (iface) attr.iface = iface;
    else attr.hostname = host;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    g->context = std::make_shared<gloo::rendezvous::Context>(rank, world);
    g->context->setTimeout(g->timeout);
    g->context->connectFullMesh(store, dev);
    /* rank r's value of kind "" lists its world - 1 pair addresses */
    g->addresses.resize((size_t)world);
    for (int r = 0; r < world; r++) {
      if (r == rank) continue;
      std::vector<char> all = store.get(std::to_string(r));
      size_t one = all.size() / (size_t)(world - 1);
      for (size_t at = 0; one && at + one <= all.size(); at += one)
        g->addresses[(size_t)r].push_back(
            gloo::transport::tcp::Address(std::vector<char>(all.begin() + (long)at, all.begin() + (long)(at + one))).str());
    }
    return g;
  } catch (const ExchangeStore::ExchangeFailed &) {
    err[0] = 0;
  } catch (const std::exception &e) {
    say(err, e.what());
    try {
      store.publish_failure();
    } catch (...) { /* the exchange failed too: the peers learn it from the rendezvous */
    }
  }
  delete g;
  return nullptr;
}

extern "C" int fsCC_glooshim_all_reduce(fsCC_glooshim *g, void *buf, size_t count, fsCC_gloo_kind kind,
                                        fsCC_gloo_red red, char *err) {
  try {
    if (kind == FSCC_GLOO_F32) all_reduce(g, static_cast<float *>(buf), count, red);
    else if (kind == FSCC_GLOO_F64) all_reduce(g, static_cast<double *>(buf), count, red);
    else all_reduce(g, static_cast<int64_t *>(buf), count, red);
    return 0;
  } catch (const std::exception &e) {
    say(err, e.what());
    return -1;
  }
}

extern "C" int fsCC_glooshim_all_gather(fsCC_glooshim *g, void *buf, size_t bytes, char *err) {
  try {
    gloo::AllgatherOptions o(g->context);
    o.setOutput(static_cast<unsigned char *>(buf), bytes * (size_t)g->context->size);
    o.setTimeout(g->timeout);
    gloo::allgather(o);
    return 0;
  } catch (const std::exception &e) {
    say(err, e.what());
    return -1;
  }
}

extern "C" int fsCC_glooshim_broadcast(fsCC_glooshim *g, void *buf, size_t bytes, int root, char *err) {
  try {
    gloo::BroadcastOptions o(g->context);
    o.setOutput(static_cast<unsigned char *>(buf), bytes);
    o.setRoot(root);
    o.setTimeout(g->timeout);
    gloo::broadcast(o);
    return 0;
  } catch (const std::exception &e) {
    say(err, e.what());
    return -1;
  }
}

extern "C" int fsCC_glooshim_barrier(fsCC_glooshim *g, char *err) {
  try {
    gloo::BarrierOptions o(g->context);
    o.setTimeout(g->timeout);
    gloo::barrier(o);
    return 0;
  } catch (const std::exception &e) {
    say(err, e.what());
    return -1;
  }
}

extern "C" void fsCC_glooshim_close(fsCC_glooshim *g) { delete g; }

extern "C" int fsCC_glooshim_owner(const fsCC_glooshim *g, const char *message) {
  try {
    std::string m = message;
    for (size_t r = 0; r < g->addresses.size(); r++)
      for (const std::string &a : g->addresses[r])
        if (m.find(a) != std::string::npos) return (int)r;
  } catch (...) {
  }
  return -1;
}
