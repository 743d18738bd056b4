// signals.cpp: async-signal-safe handlers that only store the signal number.
#include "bertrain/train/signals.h"

#include <atomic>
#include <csignal>

namespace bertrain {

namespace {
std::atomic<int> g_signal{0};
struct sigaction g_old_int, g_old_term;
extern "C" void on_signal(int sig) { g_signal.store(sig); }
}  // namespace

int signal_received() { return g_signal.load(); }

SignalGuard::SignalGuard() {
  g_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

SignalGuard::~SignalGuard() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

}  // namespace bertrain
