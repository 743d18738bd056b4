// communicator_mpi.cpp: Communicator over MPI_COMM_WORLD. Non-blocking collectives (MPI_Iallreduce) for the
// gradient buckets, advanced by a progress thread while backward computes (OpenMPI moves a non-blocking
// collective only inside MPI calls); every wait polls MPI_Test, spinning briefly then sleeping in short naps, so a
// rank that waits for another (rank 0 writing a checkpoint) leaves the cores to it, and gives up after the timeout.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bertrain/core/dtype.h"
#include "bertrain/core/error.h"
#include "train/communicator_mpi.h"

namespace bertrain::detail {

namespace {

constexpr double kSpinSeconds = 50e-3;
// How often the progress thread tests the sums in flight.
constexpr std::chrono::microseconds kProgressNap{1000};

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, static_cast<size_t>(len));
}

class MpiCommunicator final : public Communicator {
 public:
  /// `progress_thread`: advance the bucket sums from a background thread (needs MPI_THREAD_SERIALIZED: every MPI
  /// call below holds mu_); otherwise only inside progress() and the waits.
  MpiCommunicator(double timeout, bool progress_thread) : timeout_(timeout) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    std::string v(ver, static_cast<size_t>(len));
    if (const size_t nl = v.find_first_of(",\n"); nl != std::string::npos) v.resize(nl);
    desc_ = "MPI (" + v + "), " + std::to_string(size_) + " ranks";
    if (progress_thread && size_ > 1) {
      desc_ += ", progress thread";
      thread_ = std::thread([this] { progress_loop(); });
    }
  }

  ~MpiCommunicator() override {
    stop_progress_thread();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (bf16_sum_ != MPI_OP_NULL && !finalized) MPI_Op_free(&bf16_sum_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  /// Joins the progress thread (before MPI_Finalize: no MPI call may follow it). Idempotent.
  void stop_progress_thread() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string description() const override { return desc_; }

  void allreduce(double* data, int64_t n, ReduceOp op) override {
    MPI_Request req;
    {
      std::lock_guard<std::mutex> lk(mu_);
      BERTRAIN_ASSERT(pending_.empty(), "blocking allreduce while bucket sums are in flight");
      check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE,
                           op == ReduceOp::sum ? MPI_SUM : MPI_MAX, MPI_COMM_WORLD, &req),
            "MPI_Iallreduce");
    }
    wait(&req, 1, "allreduce");
  }

  void broadcast(void* data, int64_t bytes, int root) override {
    BERTRAIN_CHECK(bytes <= INT32_MAX, "broadcast of ", bytes, " bytes: at most 2^31 - 1");
    MPI_Request req;
    {
      std::lock_guard<std::mutex> lk(mu_);
      BERTRAIN_ASSERT(pending_.empty(), "broadcast while bucket sums are in flight");
      check(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD, &req), "MPI_Ibcast");
    }
    wait(&req, 1, "broadcast");
  }

  void barrier() override {
    MPI_Request req;
    {
      std::lock_guard<std::mutex> lk(mu_);
      BERTRAIN_ASSERT(pending_.empty(), "barrier while bucket sums are in flight");
      check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
    }
    wait(&req, 1, "barrier");
  }

  void start_allreduce_sum(Tensor& buffer) override {
    const DType dt = buffer.dtype();
    BERTRAIN_CHECK(dt == DType::f32 || dt == DType::f64 || dt == DType::bf16,
                   "start_allreduce_sum: f32, f64 or bf16 buffers only, got ", buffer.desc());
    BERTRAIN_CHECK(buffer.numel() <= INT32_MAX, "start_allreduce_sum: ", buffer.numel(), " elements, at most 2^31 - 1");
    rethrow_thread_error();
    MPI_Request req;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (dt == DType::bf16) {
        if (bf16_sum_ == MPI_OP_NULL) check(MPI_Op_create(&bf16_sum, 1, &bf16_sum_), "MPI_Op_create");
        check(MPI_Iallreduce(MPI_IN_PLACE, buffer.raw_data(), static_cast<int>(buffer.numel()), MPI_UINT16_T,
                             bf16_sum_, MPI_COMM_WORLD, &req),
              "MPI_Iallreduce");
      } else {
        check(MPI_Iallreduce(MPI_IN_PLACE, buffer.raw_data(), static_cast<int>(buffer.numel()),
                             dt == DType::f32 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req),
              "MPI_Iallreduce");
      }
      pending_.push_back(req);
      done_at_ = {};
    }
    cv_.notify_one();
  }

  void progress() override {
    rethrow_thread_error();
    // The gradient hooks test too: between the thread's tests, a shared-memory transport moves only the few
    // fragments one test hands it. If the thread is testing right now, there is nothing to add.
    std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
    if (lk.owns_lock()) test_pending_locked();
  }

  bool sums_complete() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return pending_.empty();
  }

  std::chrono::steady_clock::time_point sums_completed_at() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return pending_.empty() ? done_at_ : std::chrono::steady_clock::time_point{};
  }

  void wait_all() override {
    rethrow_thread_error();
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    for (;;) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (pending_.empty()) return;
        test_pending_locked();
        if (pending_.empty()) return;
      }
      nap_or_give_up(t0, "gradient allreduce");
    }
  }

  [[noreturn]] void abort(int code, const std::string& message) override {
    std::fprintf(stderr, "bertrain: rank %d of %d: %s\n", rank_, size_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; in case it does
  }

 private:
  void check(int rc, const char* what) const {
    if (rc != MPI_SUCCESS)
      throw Error("rank " + std::to_string(rank_) + ": " + what + " failed: " + mpi_error_string(rc));
  }

  /// One MPI_Testall of the bucket sums in flight (mu_ held); clears them and notes the time when all are done.
  void test_pending_locked() {
    if (pending_.empty()) return;
    int done = 0;
    check(MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (done) {
      pending_.clear();
      done_at_ = std::chrono::steady_clock::now();
    }
  }

  /// The progress thread: sleeps until a sum starts, then tests the sums in flight every kProgressNap until they
  /// are done. Between its tests the lock is free, so the trainer's thread never waits longer than one test. Most
  /// of a test's time is the transport's own work (copying fragments, summing them), which some thread has to do;
  /// the thread makes it happen while backward computes instead of at the next gradient hook.
  void progress_loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || (!pending_.empty() && !thread_failed_); });
      if (stop_) return;
      try {
        test_pending_locked();
      } catch (const Error& e) {
        thread_error_ = e.what();
        thread_failed_ = true;
        failed_.store(true);
        continue;
      }
      if (pending_.empty()) continue;
      lk.unlock();
      std::this_thread::sleep_for(kProgressNap);
      lk.lock();
    }
  }

  void rethrow_thread_error() {
    if (!failed_.load()) return;
    std::lock_guard<std::mutex> lk(mu_);
    throw Error(thread_error_);
  }

  /// Between two tests of a wait: spins for the first 50 ms (the gradient sums of a step take tens of ms, and a
  /// large message moves in many fragments that each need a test: napping between them slowed bert-mini's sums
  /// several-fold), then naps 200 us, leaving the cores to ranks that still work (rank 0 saving a checkpoint).
  /// Throws after timeout_ seconds.
  void nap_or_give_up(std::chrono::steady_clock::time_point t0, const char* what) {
    rethrow_thread_error();
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited < kSpinSeconds) return;
    if (timeout_ > 0 && waited > timeout_)
      throw Error("rank " + std::to_string(rank_) + ": waited " + std::to_string(static_cast<int>(waited)) +
                  " s for a " + what + " with the other ranks (BERTRAIN_COLLECTIVE_TIMEOUT=" +
                  std::to_string(static_cast<int>(timeout_)) + "): another rank has died or hangs");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }

  /// Polls until all `n` requests (not the bucket sums) are complete; throws after timeout_ seconds.
  void wait(MPI_Request* reqs, int n, const char* what) {
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      int done = 0;
      {
        std::lock_guard<std::mutex> lk(mu_);
        check(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
      }
      if (done) return;
      nap_or_give_up(t0, what);
    }
  }

  /// The reduction of bf16 gradient buckets: inout[i] = bf16(float(in[i]) + float(inout[i])), one pairwise sum in
  /// f32 rounded to nearest even. Commutative (IEEE addition is), so OpenMPI may use any of its algorithms; each
  /// computes every element's sum once and sends that result to all ranks (binomial reduce + broadcast, or ring
  /// reduce-scatter + allgather), so all ranks receive the same bits. Declared on MPI_UINT16_T: the bits of bf16.
  static void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
    const auto* a = static_cast<const uint16_t*>(in);
    auto* b = static_cast<uint16_t*>(inout);
    for (int i = 0; i < *len; ++i) b[i] = bf16::from_float(bf16::to_float(a[i]) + bf16::to_float(b[i]));
  }

  int rank_ = 0, size_ = 1;
  MPI_Op bf16_sum_ = MPI_OP_NULL;  // created at the first bf16 sum
  double timeout_;
  std::string desc_;
  mutable std::mutex mu_;                  // held around every MPI call once the progress thread runs
  std::condition_variable cv_;
  std::vector<MPI_Request> pending_;       // the bucket sums in flight
  std::chrono::steady_clock::time_point done_at_{};  // when pending_ last became empty
  std::thread thread_;
  bool stop_ = false;
  bool thread_failed_ = false;             // the thread's test threw; thread_error_ says what
  std::atomic<bool> failed_{false};
  std::string thread_error_;
};

bool g_initialised_here = false;
bool g_serialized = false;  // MPI_Init_thread gave at least MPI_THREAD_SERIALIZED
std::weak_ptr<MpiCommunicator> g_comm;

// BERTRAIN_PROGRESS_THREAD=1 turns the progress thread on; unset or anything else leaves the sums to the
// gradient hooks and the final wait. Off by default: with one core per rank (nothing spare for the thread and the
// transport's own work) it cost about 10% of a bert-base step on fast links, while it saved 17% on a 1 Gb/s link
// (docs/results/cluster.md).
bool progress_thread_wanted() {
  const char* v = std::getenv("BERTRAIN_PROGRESS_THREAD");
  return v && std::string(v) == "1";
}

}  // namespace

std::shared_ptr<Communicator> make_mpi_world(int* argc, char*** argv, double timeout_seconds) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) throw Error("MPI_Init_thread failed: " + mpi_error_string(rc));
    g_initialised_here = true;
    // MPI is called from the trainer's thread and the communicator's progress thread, never at once (the
    // communicator's lock); the loader's prefetch thread and OpenMP never call MPI. With FUNNELED only, the
    // progress thread stays off.
    BERTRAIN_CHECK(provided >= MPI_THREAD_FUNNELED, "MPI provides thread level ", provided,
                   ", bertrain needs MPI_THREAD_FUNNELED");
    g_serialized = provided >= MPI_THREAD_SERIALIZED;
  } else {
    int provided = 0;
    MPI_Query_thread(&provided);
    g_serialized = provided >= MPI_THREAD_SERIALIZED;
  }
  // Errors come back as return codes (turned into bertrain::Error; main() then calls abort()), never a silent hang.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  auto c = std::make_shared<MpiCommunicator>(timeout_seconds, g_serialized && progress_thread_wanted());
  g_comm = c;
  return c;
}

void finalize_mpi() {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (auto c = g_comm.lock()) c->stop_progress_thread();
  if (g_initialised_here && inited && !finalized) MPI_Finalize();
}

}  // namespace bertrain::detail
