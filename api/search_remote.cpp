#include "api/search_remote.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "api/errors.hpp"
#include "experiment/config.hpp"

namespace bmpipe::api {

namespace {

/// What process 0 sends a worker that asks when the search is over.
const char* const kEnd = "end";

}  // namespace

RemoteExecutor::RemoteExecutor(const SearchSetup& s, TaskTransport& transport, int threads)
    : transport_(transport), own_(s, threads) {}

void RemoteExecutor::run(const SearchPass& pass, TaskFeed& feed) {
  std::atomic<bool> own_done{false};
  std::exception_ptr own_error, error;  // own_error: written once, before own_done is set
  std::thread own([&] {
    try {
      own_.run(pass, feed);
    } catch (...) {
      own_error = std::current_exception();
    }
    own_done.store(true);
  });
  // Workers that asked while a pass had nothing left (or between passes) are served
  // first; the others as their requests arrive.
  std::vector<int> asking;
  asking.swap(waiting_);
  std::size_t out = 0;  // tasks handed to workers and not yet put back
  const int size = transport_.processes();
  for (;;) {
    for (const int w : asking) out += assign(pass, feed, w);
    asking.clear();
    if (own_done.load() && out == 0) break;
    const std::optional<TaskTransport::Message> message = transport_.poll();
    if (!message) {
      // A request waits at most 200 us. Alone, nobody asks: waking 5,000 times a second
      // cost one process bound to one core (mpirun's default for -np 1 and 2) 8 % of the
      // GPT-3 search, --threads 1 (6.37 s -> 5.86 s, medians of 3 and 2).
      usleep(size > 1 ? 200 : 20000);
      continue;
    }
    if (message->tag == TaskTransport::failure) transport_.abort(message->from, message->text);
    if (message->tag == TaskTransport::request) {
      asking.push_back(message->from);
      continue;
    }
    for (const auto& item : nlohmann::json::parse(message->text)) {
      --out;
      if (error) continue;  // drained
      try {
        feed.put(item[0].get<std::size_t>(), decode_outcome(item[1].get<std::string>()));
      } catch (...) {
        error = std::current_exception();
        feed.stop();
      }
    }
  }
  own.join();
  if (error) std::rethrow_exception(error);
  if (own_error) std::rethrow_exception(own_error);
}

void RemoteExecutor::finish() {
  for (int w : waiting_) transport_.send(w, TaskTransport::assign, kEnd);
  for (std::size_t told = waiting_.size();
       told < static_cast<std::size_t>(transport_.processes() - 1); ++told) {
    const TaskTransport::Message asked = transport_.receive(-1, TaskTransport::request);
    transport_.send(asked.from, TaskTransport::assign, kEnd);
  }
  waiting_.clear();
}

std::size_t RemoteExecutor::assign(const SearchPass& pass, TaskFeed& feed, int w) {
  std::vector<SearchTask> tasks;
  const std::size_t want = feed.chunk(transport_.processes());
  while (tasks.size() < want)
    if (const std::optional<SearchTask> task = feed.take())
      tasks.push_back(*task);
    else
      break;
  if (tasks.empty())
    waiting_.push_back(w);
  else
    transport_.send(w, TaskTransport::assign, encode_share(pass, tasks));
  return tasks.size();
}

SetupState setup_state(const std::function<void()>& setup) {
  try {
    setup();
  } catch (const RequestError& e) {
    return {2, e.what()};
  } catch (const ConfigError& e) {
    return {2, e.what()};
  } catch (const std::exception& e) {
    return {70, std::string("internal error: ") + e.what()};
  }
  return {};
}

SetupVerdict agree_on_setup(TaskTransport& transport, int rank, const SetupState& mine) {
  if (rank != 0) {
    // "CODE\nERROR"; the answer is the worst code.
    transport.send(0, TaskTransport::setup, std::to_string(mine.code) + "\n" + mine.error);
    return {std::stoi(transport.receive(0, TaskTransport::setup).text), {}};
  }
  SetupVerdict verdict{mine.code, mine.error};
  for (int r = 1; r < transport.processes(); ++r) {
    const std::string text = transport.receive(r, TaskTransport::setup).text;
    const std::size_t newline = text.find('\n');
    verdict.code = std::max(verdict.code, std::stoi(text.substr(0, newline)));
    const std::string error = text.substr(newline + 1);
    if (verdict.message.empty() && !error.empty())
      verdict.message = "process " + std::to_string(r) + ": " + error;
  }
  for (int r = 1; r < transport.processes(); ++r)
    transport.send(r, TaskTransport::setup, std::to_string(verdict.code));
  return verdict;
}

void serve_tasks(const SearchSetup& s, TaskTransport& transport, int threads) {
  for (;;) {
    transport.send(0, TaskTransport::request, "");
    const std::string text = transport.receive(0, TaskTransport::assign).text;
    if (text == kEnd) return;
    nlohmann::json items = nlohmann::json::array();
    try {
      const auto [pass, tasks] = decode_share(text);
      const std::vector<TaskOutcome> got = run_tasks(s, pass, tasks, threads);
      for (std::size_t k = 0; k < tasks.size(); ++k)
        items.push_back({tasks[k].layout, encode_outcome(got[k])});
    } catch (const std::exception& e) {
      transport.send(0, TaskTransport::failure, e.what());
      throw;
    }
    transport.send(0, TaskTransport::results, items.dump());
  }
}

}  // namespace bmpipe::api
