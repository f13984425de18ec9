#include "tests/util/kiln_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <utility>

extern char** environ;

namespace kiln {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string KilnBinary() {
  const char* root = std::getenv("TEST_SRCDIR");
  const std::string base = root ? root : ".";
  for (const std::string& p : {base + "/kiln/tools/kiln", base + "/_main/tools/kiln"}) {
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "tools/kiln";
}

pid_t StartKiln(const KilnJob& job) {
  // Everything is prepared before fork: the child only calls async-signal-safe functions.
  std::vector<std::string> all = {KilnBinary()};
  all.insert(all.end(), job.args.begin(), job.args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.push_back(*e);
  env_strings.insert(env_strings.end(), job.env.begin(), job.env.end());
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(&e[0]);
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(job.dir.c_str()) != 0) _exit(120);
    const int fd = open(job.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(121);
  }
  return pid;
}

std::vector<KilnOutcome> RunKilnJobs(const std::vector<KilnJob>& jobs, size_t parallel) {
  using Clock = std::chrono::steady_clock;
  std::vector<KilnOutcome> out(jobs.size());
  std::map<pid_t, std::pair<size_t, Clock::time_point>> running;
  size_t next = 0;
  while (next < jobs.size() || !running.empty()) {
    while (next < jobs.size() && running.size() < parallel) {
      running[StartKiln(jobs[next])] = {next, Clock::now()};
      ++next;
    }
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      const size_t job = it->second.first;
      if (waitpid(it->first, &status, WNOHANG) == 0) {
        if (Clock::now() - it->second.second < std::chrono::seconds(60)) {
          ++it;
          continue;
        }
        kill(it->first, SIGKILL);
        waitpid(it->first, &status, 0);
        out[job].output = "(timed out) ";
      }
      out[job].status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      out[job].output += Slurp(jobs[job].log);
      it = running.erase(it);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return out;
}

KilnOutcome RunKiln(const std::string& dir, const std::vector<std::string>& args,
                    const std::vector<std::string>& env) {
  return RunKilnJobs({{dir, args, dir + "/../kiln_output.txt", env}}, 1)[0];
}

std::string Npy(const std::vector<int>& dims, float v) {
  std::string shape;
  size_t n = 1;
  for (int d : dims) {
    shape += std::to_string(d) + ", ";
    n *= d;
  }
  if (dims.size() != 1) shape.resize(shape.size() - 2);
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  for (size_t i = 0; i < n; ++i) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

std::string Idx(unsigned char type_dims, const std::vector<int>& dims, const std::string& data) {
  std::string out = {0, 0, 8, static_cast<char>(type_dims)};
  for (int d : dims) {
    for (int shift : {24, 16, 8, 0}) out += static_cast<char>((d >> shift) & 0xff);
  }
  return out + data;
}

}  // namespace kiln
