// The small-file relay of relay.py (gx_relay) and the one-flight upload of upload.py
// (gx_upload; gx_upload_many: a worker's bundle of them in one call) in C++ over XrdCl
// (issue 21): the same requests in the same flights, without
// Python waking for each reply. Built by `make native` (Makefile)
// into libgxrelay.so; relaynative.py loads it with ctypes, which lets go of the GIL for
// the whole call. Why C++: the Python relay costs ~1.2 CPU-ms a file, most of it Python
// taking the GIL for each of XrdCl's reply callbacks; on 2 cores that capped small files
// over the WAN (docs/performance-notes.md, "the native relay"). This file keeps to XrdCl's
// public asynchronous API and holds no policy: the caller builds the URLs (with tokens),
// decides read-back, and maps every outcome to a TransferError.
//
// Flights seen by the destination (relay.py's docstring has the why of each):
//   1. open FINAL name, kXR_new | kXR_posc | kXR_mkpath, sent once the source is open,
//      in flight while the source is read and closed (back to back);
//   2. write + close back to back; with read-back: write + read, then
//   3. close, only after the bytes read back have the source's adler32. `verified` (if
//      not NULL) is called once that close is sent: the caller's slot is free while the
//      close, which only makes the verified bytes visible, is on the wire.
// A copy that fails after its destination's open succeeded sends rm, then close: nothing
// is left. It waits for them, as relay.py does, except after a cancel: then it returns at
// once and the last reply cleans up (an open answered later is removed then), so a hung
// server never holds a cancelled copy.
//
// Memory: a Job holds the files, the buffers and one handler (Slot) per request. Every
// request carries a timeout, so XrdCl answers each one; the Job is deleted by whichever
// comes last, the caller leaving or the last reply.

#include <XrdCl/XrdClFile.hh>
#include <XrdCl/XrdClFileSystem.hh>
#include <XrdCl/XrdClURL.hh>
#include <XrdCl/XrdClXRootDResponses.hh>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

using namespace XrdCl;
using Clock = std::chrono::steady_clock;

extern "C" {

// Outcomes (relaynative.py has the same numbers).
enum {
  GX_OK = 0,
  GX_XRD_ERROR = 1,      // status/code/errNo/message of a failed request; side: whose
  GX_TOO_LARGE = 2,      // source larger than max_size; nothing written
  GX_SHORT_READ = 3,     // the source returned `got` bytes, not `size`
  GX_EXPECTED = 4,       // source adler32 != the catalogue's; nothing written
  GX_BACK_LENGTH = 5,    // the read-back returned a different length
  GX_BACK_ADLER = 6,     // the read-back's adler32 != the source's
  GX_CANCELLED = 7,
  GX_TIMEOUT = 8,        // no reply within wait_s
  GX_LOCAL_ERROR = 9,    // gx_upload: the local file failed (errNo)
  GX_IS_DIR = 10,        // gx_upload: the local source is a directory
  GX_OUTSIDE = 11,       // gx_upload: the local source resolves outside `root`; nothing sent
  GX_NOT_STARTED = 12,   // gx_upload_many: the batch was cancelled before this item
};

// Called (in the caller's thread) when a read-back matched and the close was sent.
typedef void (*gx_notify)(void);

struct gx_result {
  int32_t outcome;
  int32_t side;          // 0 source, 1 destination
  uint16_t status, code;
  uint32_t errNo;
  uint64_t size;         // bytes of the source (its stat)
  uint64_t got;          // bytes read (GX_SHORT_READ)
  uint32_t adler;        // of the bytes read from the source
  uint32_t stored;       // of the bytes read back
  int32_t has_stored;
  int32_t posc_flags;    // StatInfo flags of the open destination (probe), -1: not asked
  double src_open_s, dst_open_s;
  double wait_s;         // the wait that expired (GX_TIMEOUT)
  char message[1024];
};

// Tests only (tests/integration/test_xrootd_relay.py): damage the first N read-backs as
// they arrive, flipping a byte (mode 0) or dropping the last one (mode 1), to prove a
// mismatch fails the copy and leaves nothing. 0 in production.
int32_t gx_test_damage_back = 0;
int32_t gx_test_damage_mode = 0;
// Tests only (test_xrootd_failed_write_posc.py): a failed copy waits for its destination's
// close, if one was sent, before its own cleanup (rm + close), so that close meets a file
// XrdCl already holds as closed (the order a loaded machine may give). 0 in production.
int32_t gx_test_close_answered_first = 0;

// One upload of gx_upload_many: gx_upload's arguments.
struct gx_item {
  const char *path, *dst, *dst_server, *dst_path, *root;
  uint64_t max_size;
  double wait;
  int32_t has_expected;
  uint32_t expected;
  int64_t read_back_max;
  int32_t probe_posc;
  uint16_t cleanup_timeout;
  const volatile int32_t *cancel;
};

// Jobs not yet deleted (a copy in progress, or a cancelled one whose last answer is still
// due): 0 when idle, so a test sees a cleanup end and a leak.
int32_t gx_jobs_alive = 0;

}  // extern "C"

namespace {

struct Job;

struct Slot : public ResponseHandler {
  Job *job = nullptr;
  bool sent = false, done = false;
  XRootDStatus st;
  uint32_t len = 0;          // bytes of a read's answer
  Clock::time_point at;
  double seconds = 0;        // from the request to its answer
  void HandleResponse(XRootDStatus *status, AnyObject *response) override;
};

struct Job {
  std::mutex mu;
  std::condition_variable cv;
  int pending = 0;           // requests sent and not answered
  bool failed = false;       // the copy failed: a destination opened must go
  bool cleanup_sent = false; // rm + close of the destination sent
  bool abandoned = false;    // the caller left: the last answer deletes the Job
  File src, dst;
  FileSystem fs;
  std::string dst_path;
  uint16_t cleanup_timeout;
  std::vector<char> data, back;
  Slot s_read, s_sclose, s_open, s_write, s_back, s_dclose, s_rm, s_close2;

  Job(const char *server, const char *path, uint16_t ct)
      : fs(URL(server)), dst_path(path), cleanup_timeout(ct) {
    __atomic_add_fetch(&gx_jobs_alive, 1, __ATOMIC_RELAXED);
    for (Slot *s : {&s_read, &s_sclose, &s_open, &s_write, &s_back, &s_dclose, &s_rm, &s_close2})
      s->job = this;
  }
  ~Job() { __atomic_sub_fetch(&gx_jobs_alive, 1, __ATOMIC_RELAXED); }

  // Must the destination be removed now? (the lock held) Once only.
  bool take_cleanup() {
    if (!failed || cleanup_sent || !s_open.done || !s_open.st.IsOK()) return false;
    cleanup_sent = true;
    return true;
  }
};

void release(Job *job, bool gone) {
  if (gone) delete job;
}

// Send a request answered to `s`; a refusal to send is its answer. The lock is not held
// during the call: XrdCl may answer on another thread at once. Never deletes the Job: it
// is called by the caller before it leaves, or by send_cleanup holding a token.
template <typename F>
void send(Job *job, Slot &s, F call) {
  {
    std::lock_guard<std::mutex> lock(job->mu);
    s.sent = true;
    s.done = false;
    s.at = Clock::now();
    job->pending++;
  }
  XRootDStatus st = call();
  if (st.IsOK() && st.code != suAlreadyDone) return;
  // Not sent: XrdCl will not answer it. A refusal, or a close of a file XrdCl holds as
  // closed: FileStateHandler::Close returns stOK + suAlreadyDone and never calls the
  // handler (counted as sent, its Job would never be deleted).
  std::lock_guard<std::mutex> lock(job->mu);
  s.st = st;
  s.done = true;
  job->pending--;
  job->cv.notify_all();
}

// rm, then close (refused at once if a close was already sent), of the failed copy's
// file, as relay.py's _discard. The Job cannot go between the two: a token is held.
void send_cleanup(Job *job) {
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->pending++;
  }
  send(job, job->s_rm, [&] { return job->fs.Rm(job->dst_path, &job->s_rm, job->cleanup_timeout); });
  send(job, job->s_close2, [&] { return job->dst.Close(&job->s_close2, job->cleanup_timeout); });
  bool gone;
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->pending--;
    gone = job->abandoned && job->pending == 0;
  }
  release(job, gone);
}

void Slot::HandleResponse(XRootDStatus *status, AnyObject *response) {
  uint32_t n = 0;
  if (response) {
    ChunkInfo *chunk = nullptr;
    response->Get(chunk);
    if (chunk) n = chunk->length;
  }
  {
    std::lock_guard<std::mutex> lock(job->mu);
    st = status ? *status : XRootDStatus(stError, errInternal);
    len = n;
    if (this == &job->s_back && gx_test_damage_back > 0) {
      gx_test_damage_back--;
      if (gx_test_damage_mode == 1 && len > 0) len--;
      else if (len > 0) job->back[0] ^= 1;
    }
    seconds = std::chrono::duration<double>(Clock::now() - at).count();
    done = true;
  }
  // Woken after the lock is let go of: a waiter woken under it would block on the mutex
  // at once (one more context switch a reply). This reply still counts in `pending`, so
  // the Job cannot be deleted before the second section below.
  job->cv.notify_all();
  bool clean, gone;
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->pending--;
    clean = job->abandoned && job->take_cleanup();    // a late open of an abandoned copy
    gone = job->abandoned && job->pending == 0 && !clean;
  }
  delete status;
  delete response;
  if (clean) {
    send_cleanup(job);
    return;                    // its answers (or refusals) delete the Job
  }
  release(job, gone);
}

enum Waited { ANSWERED, CANCELLED, EXPIRED };

Waited wait_for(Job *job, Slot &s, double seconds, const volatile int32_t *cancel) {
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  std::unique_lock<std::mutex> lock(job->mu);
  while (!s.done) {
    if (cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED)) return CANCELLED;
    if (Clock::now() > end) return EXPIRED;
    job->cv.wait_for(lock, std::chrono::milliseconds(250));
  }
  return ANSWERED;
}

// The caller leaves. A failed copy: its destination, if opened, is removed (waited for
// unless cancelled; an open still in flight is removed by its answer).
void leave(Job *job, bool failed, bool cancelled, double open_wait) {
  bool clean = false;
  if (failed && !cancelled && job->s_open.sent) wait_for(job, job->s_open, open_wait, nullptr);
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->failed = failed;
    if (!cancelled) clean = job->take_cleanup();
  }
  if (clean) {
    if (gx_test_close_answered_first && job->s_dclose.sent)
      wait_for(job, job->s_dclose, job->cleanup_timeout + 5, nullptr);
    send_cleanup(job);       // the Job stays: abandoned is not yet set
    wait_for(job, job->s_rm, job->cleanup_timeout + 5, nullptr);
    wait_for(job, job->s_close2, job->cleanup_timeout + 5, nullptr);
  }
  bool gone;
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->abandoned = true;
    clean = job->take_cleanup();             // cancelled with the open answered OK
    gone = job->pending == 0 && !clean;
  }
  if (clean) send_cleanup(job);
  else release(job, gone);
}

void fail(gx_result *r, int side, const XRootDStatus &st) {
  r->outcome = GX_XRD_ERROR;
  r->side = side;
  r->status = st.status;
  r->code = st.code;
  r->errNo = st.errNo;
  std::string text = st.ToStr();
  std::strncpy(r->message, text.c_str(), sizeof(r->message) - 1);
}

int waited(gx_result *r, Waited w, double seconds) {
  r->outcome = w == CANCELLED ? GX_CANCELLED : GX_TIMEOUT;
  r->wait_s = seconds;
  return r->outcome;
}

uint32_t adler_of(const char *p, size_t n) {
  uLong a = adler32(0L, Z_NULL, 0);
  return static_cast<uint32_t>(adler32(a, reinterpret_cast<const Bytef *>(p), n));
}

// The file open as `fd` (opened as `path`, symbolic links followed) lies under the
// directory `root` (a real path: names.check_within's rule, on the file actually read,
// so a link swapped in after the plan cannot point the read elsewhere).
bool within(int fd, const char *path, const char *root) {
  char link[64], buf[4097];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t k = ::readlink(link, buf, sizeof(buf) - 1);
  std::string real;
  if (k > 0 && buf[0] == '/') {
    real.assign(buf, static_cast<size_t>(k));
  } else {                   // no /proc: the C library's realpath
    char *rp = ::realpath(path, nullptr);
    if (!rp) return false;
    real = rp;
    std::free(rp);
  }
  std::string base(root);
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  if (base == "/") return real.size() > 1 && real[0] == '/';
  return real.size() > base.size() + 1 && real.compare(0, base.size(), base) == 0 &&
         real[base.size()] == '/';
}

uint16_t seconds16(double s) { return static_cast<uint16_t>(s < 1 ? 1 : (s > 65535 ? 65535 : s)); }

int finish(Job *job, uint64_t n, double wait, int32_t has_expected, uint32_t expected,
           bool read_back, int32_t probe_posc, const volatile int32_t *cancel,
           gx_notify verified, gx_result *r);

// After the source is open and its size known: the copy's flights. GX_OK or the failure.
int copy(Job *job, const char *dst, uint64_t n, double stall, double wait, int32_t has_expected,
         uint32_t expected, bool read_back, int32_t probe_posc, const volatile int32_t *cancel,
         gx_notify verified, gx_result *r) {
  const uint16_t stmo = seconds16(stall), tmo = seconds16(wait);
  job->data.resize(n + 1);
  job->src.SetProperty("BundledClose", "true");
  job->dst.SetProperty("BundledClose", "true");
  const OpenFlags::Flags flags = OpenFlags::New | OpenFlags::POSC | OpenFlags::MakePath;
  send(job, job->s_open, [&] { return job->dst.Open(dst, flags, Access::None, &job->s_open, tmo); });
  send(job, job->s_read, [&] {
    return job->src.Read(0, static_cast<uint32_t>(n + 1), job->data.data(), &job->s_read, stmo);
  });
  send(job, job->s_sclose, [&] { return job->src.Close(&job->s_sclose, stmo); });

  Waited w = wait_for(job, job->s_read, stall + 5, cancel);
  if (w != ANSWERED) return waited(r, w, stall + 5);
  if (!job->s_read.st.IsOK()) {
    fail(r, 0, job->s_read.st);
    return r->outcome;
  }
  if (job->s_read.len != n) {
    r->got = job->s_read.len;
    return r->outcome = GX_SHORT_READ;
  }
  wait_for(job, job->s_sclose, stall + 5, cancel);   // a failed close of a file read in full is harmless
  r->adler = adler_of(job->data.data(), n);
  return finish(job, n, wait, has_expected, expected, read_back, probe_posc, cancel, verified,
                r);
}

// The destination's open is in flight and job->data holds the n bytes to send (their
// adler32 in r->adler): the copy's last flights. GX_OK or the failure.
int finish(Job *job, uint64_t n, double wait, int32_t has_expected, uint32_t expected,
           bool read_back, int32_t probe_posc, const volatile int32_t *cancel,
           gx_notify verified, gx_result *r) {
  const uint16_t tmo = seconds16(wait);
  Waited w = wait_for(job, job->s_open, wait + 5, cancel);
  if (w != ANSWERED) return waited(r, w, wait + 5);
  r->dst_open_s = job->s_open.seconds;
  if (!job->s_open.st.IsOK()) {
    fail(r, 1, job->s_open.st);
    return r->outcome;
  }
  if (probe_posc) {
    StatInfo *info = nullptr;
    XRootDStatus ps = job->fs.Stat(job->dst_path, info, job->cleanup_timeout);
    if (ps.IsOK() && info) r->posc_flags = static_cast<int32_t>(info->GetFlags());
    delete info;
  }
  if (has_expected && r->adler != expected) return r->outcome = GX_EXPECTED;

  if (n)
    send(job, job->s_write, [&] {
      return job->dst.Write(0, static_cast<uint32_t>(n), job->data.data(), &job->s_write, tmo);
    });
  if (read_back) {
    job->back.resize(n + 1);
    send(job, job->s_back, [&] {
      return job->dst.Read(0, static_cast<uint32_t>(n + 1), job->back.data(), &job->s_back, tmo);
    });
  } else {
    send(job, job->s_dclose, [&] { return job->dst.Close(&job->s_dclose, tmo); });
  }
  if (n) {
    w = wait_for(job, job->s_write, wait + 5, cancel);
    if (w != ANSWERED) return waited(r, w, wait + 5);
    if (!job->s_write.st.IsOK()) {
      fail(r, 1, job->s_write.st);
      return r->outcome;
    }
  }
  if (read_back) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (attempt == 1)       // read before the write ended? ask again, once
        send(job, job->s_back, [&] {
          return job->dst.Read(0, static_cast<uint32_t>(n + 1), job->back.data(), &job->s_back, tmo);
        });
      w = wait_for(job, job->s_back, wait + 5, cancel);
      if (w != ANSWERED) return waited(r, w, wait + 5);
      if (!job->s_back.st.IsOK()) {
        fail(r, 1, job->s_back.st);
        return r->outcome;
      }
      r->has_stored = job->s_back.len == n;
      r->stored = r->has_stored ? adler_of(job->back.data(), n) : 0;
      if (r->has_stored && r->stored == r->adler) break;
    }
    if (!r->has_stored) return r->outcome = GX_BACK_LENGTH;
    if (r->stored != r->adler) return r->outcome = GX_BACK_ADLER;
    send(job, job->s_dclose, [&] { return job->dst.Close(&job->s_dclose, tmo); });
    if (verified) verified();
  }
  w = wait_for(job, job->s_dclose, wait + 5, cancel);
  if (w != ANSWERED) return waited(r, w, wait + 5);
  if (!job->s_dclose.st.IsOK()) {
    fail(r, 1, job->s_dclose.st);
    return r->outcome;
  }
  return GX_OK;
}

}  // namespace

extern "C" {

// Copy root:// `src` (at most max_size bytes) to the new root:// file `dst` (URLs with
// their tokens as CGI); on failure nothing is left at `dst`. `dst_server` + `dst_path`:
// the FileSystem and path for the rm and the POSC probe (probe_posc: the open file's stat
// flags go to posc_flags). stall: seconds for the source's requests, wait: for the
// destination's (each request's timeout is max(1, int(...)), as relay.py's). expected:
// the catalogue's adler32 (if has_expected). read_back_max: a file of at most this many
// bytes is read back before its close (-1: never). cancel: read while waiting; non-zero
// ends the copy (GX_CANCELLED). verified: called once a read-back matched and the close
// is sent (NULL: not called).
int gx_relay(const char *src, const char *dst, const char *dst_server, const char *dst_path,
             uint64_t max_size, double stall, double wait, int32_t has_expected,
             uint32_t expected, int64_t read_back_max, int32_t probe_posc,
             uint16_t cleanup_timeout, const volatile int32_t *cancel, gx_notify verified,
             gx_result *r) {
  std::memset(r, 0, sizeof(*r));
  r->posc_flags = -1;
  Job *job = new Job(dst_server, dst_path, cleanup_timeout);
  const uint16_t stmo = seconds16(stall);

  // The source: open (its stat comes with the open's answer), size checked.
  auto t0 = Clock::now();
  XRootDStatus st = job->src.Open(src, OpenFlags::Read, Access::None, stmo);
  r->src_open_s = std::chrono::duration<double>(Clock::now() - t0).count();
  int result = GX_OK;
  if (!st.IsOK()) {
    fail(r, 0, st);
    result = r->outcome;
  } else {
    StatInfo *info = nullptr;
    st = job->src.Stat(false, info, stmo);
    if (!st.IsOK() || !info) {
      fail(r, 0, st);
      result = r->outcome;
    } else {
      r->size = info->GetSize();
      if (r->size > max_size) result = r->outcome = GX_TOO_LARGE;
    }
    delete info;
    if (result != GX_OK) {
      XRootDStatus ignored = job->src.Close(stmo);
      (void)ignored;
    }
  }
  if (result == GX_OK) {
    const bool read_back = read_back_max >= 0 && r->size <= static_cast<uint64_t>(read_back_max);
    result = copy(job, dst, r->size, stall, wait, has_expected, expected, read_back, probe_posc,
                  cancel, verified, r);
  }
  leave(job, result != GX_OK, result == GX_CANCELLED, wait + 5);
  return result;
}

// Upload the local file `path` (at most max_size bytes) to the new root:// file `dst`:
// upload.py's one-flight upload. The file is read first (open, fstat, read, close: a
// local failure never touches the destination; GX_LOCAL_ERROR with errNo, GX_IS_DIR),
// then the destination sees gx_relay's flights. Arguments as gx_relay's.
// root: the directory the file must resolve under (GX_OUTSIDE; NULL or "": not checked).
int gx_upload(const char *path, const char *dst, const char *dst_server, const char *dst_path,
              const char *root, uint64_t max_size, double wait, int32_t has_expected,
              uint32_t expected, int64_t read_back_max, int32_t probe_posc,
              uint16_t cleanup_timeout, const volatile int32_t *cancel, gx_notify verified,
              gx_result *r) {
  std::memset(r, 0, sizeof(*r));
  r->posc_flags = -1;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    r->errNo = errno;
    return r->outcome = GX_LOCAL_ERROR;
  }
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    r->errNo = errno;
    ::close(fd);
    return r->outcome = GX_LOCAL_ERROR;
  }
  if (S_ISDIR(sb.st_mode)) {
    ::close(fd);
    return r->outcome = GX_IS_DIR;
  }
  if (root && *root && !within(fd, path, root)) {
    ::close(fd);
    return r->outcome = GX_OUTSIDE;
  }
  r->size = static_cast<uint64_t>(sb.st_size);
  if (r->size > max_size) {
    ::close(fd);
    return r->outcome = GX_TOO_LARGE;
  }
  const uint64_t n = r->size;
  Job *job = new Job(dst_server, dst_path, cleanup_timeout);
  job->data.resize(n + 1);
  uint64_t got = 0;
  while (got < n + 1) {
    ssize_t k = ::read(fd, job->data.data() + got, n + 1 - got);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      r->errNo = errno;
      ::close(fd);
      delete job;
      return r->outcome = GX_LOCAL_ERROR;
    }
    if (k == 0) break;
    got += static_cast<uint64_t>(k);
  }
  ::close(fd);
  int result = GX_OK;
  if (got != n) {
    r->got = got;
    result = r->outcome = GX_SHORT_READ;
  } else {
    r->adler = adler_of(job->data.data(), n);
    const OpenFlags::Flags flags = OpenFlags::New | OpenFlags::POSC | OpenFlags::MakePath;
    job->dst.SetProperty("BundledClose", "true");
    const uint16_t tmo = seconds16(wait);
    send(job, job->s_open, [&] { return job->dst.Open(dst, flags, Access::None, &job->s_open, tmo); });
    const bool read_back = read_back_max >= 0 && n <= static_cast<uint64_t>(read_back_max);
    result = finish(job, n, wait, has_expected, expected, read_back, probe_posc, cancel,
                    verified, r);
  }
  leave(job, result != GX_OK, result == GX_CANCELLED, wait + 5);
  return result;
}

// n uploads one after the other in one call (a worker's bundle of small files: the GIL
// is let go of once for all of them, not once a file). Item i's result goes to results[i],
// the seconds from the call's start to its start and end to times[2i], times[2i+1]. Once
// *stop is set (the bundle's first job cancelled: a stop, or the watchdog) the items not
// yet begun end as GX_NOT_STARTED, nothing sent for them.
int gx_upload_many(int32_t n, const gx_item *items, const volatile int32_t *stop,
                   gx_result *results, double *times) {
  const auto t0 = Clock::now();
  auto since = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  int failed = 0;
  for (int32_t i = 0; i < n; ++i) {
    const gx_item &it = items[i];
    gx_result *r = &results[i];
    times[2 * i] = since();
    if ((stop && __atomic_load_n(stop, __ATOMIC_RELAXED)) ||
        (it.cancel && __atomic_load_n(it.cancel, __ATOMIC_RELAXED))) {
      std::memset(r, 0, sizeof(*r));
      r->posc_flags = -1;
      r->outcome = GX_NOT_STARTED;
    } else {
      gx_upload(it.path, it.dst, it.dst_server, it.dst_path, it.root, it.max_size, it.wait,
                it.has_expected, it.expected, it.read_back_max, it.probe_posc,
                it.cleanup_timeout, it.cancel, nullptr, r);
    }
    times[2 * i + 1] = since();
    failed += r->outcome != GX_OK;
  }
  return failed;
}

}  // extern "C"
