#include "model/tensor_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/logging.h"

namespace tpserve {

namespace {

// A view's data must be at least this aligned: the portable kernels read floats and the quantised
// blocks' 16-bit scales through typed pointers. A GGUF's tensors are (general.alignment, 32 by default).
constexpr uintptr_t kViewAlignment = 32;

// Whether the page cache gives the mapping [base, base + size) 2 MiB pages: faults the whole mapping in and
// looks at how it was mapped. A file's cache can be part 2 MiB folios and part 4 KiB, and in any pattern:
// - SmolLM2 F16 after a busy hour: 22 of its 264 MB in huge pages, decode at 38 tok/s mapped against 45-48
//   read;
// - SmolLM2 Q5_1 after llama.cpp had read it: 61 % in huge pages, and 8 windows spread over it (what this
//   probe faulted before) all huge, since earlier probes had read those windows into 2 MiB folios; decode 77
//   tok/s, and 88-90 with the file read again.
// Nine tenths of the whole windows must be huge: a fresh load leaves the windows of the header, which the
// reader preads first, in small folios (3 of SmolLM2's 42 to 69). Then this process's page tables are dropped
// (the page cache keeps the pages): views populate what they use, so a rank's RSS is its own share.
bool MappedInHugePages(const uint8_t* base, size_t size) {
  const size_t huge = HugePageArena::kPageBytes;
  const size_t windows = size / huge;  // whole ones: the mapping starts on a 2 MiB boundary
  if (windows < 2) return false;
  auto* p = const_cast<uint8_t*>(base);
  if (::madvise(p, size, MADV_POPULATE_READ) != 0) return false;
  const std::string kb = SmapsValue(base, "FilePmdMapped:");  // "4096 kB": the whole mapping's
  ::madvise(p, size, MADV_DONTNEED);
  return !kb.empty() && std::stoull(kb) * 1024 * 10 >= windows * huge * 9;
}

// Whether dropping the file's cached pages and reading it again can bring it back in 2 MiB folios: a local
// block file system (ext4, XFS, Btrfs make large folios on recent kernels). Not tmpfs, whose pages are the
// data, nor a network or FUSE one, where a drop would fetch the whole file again.
bool OnLocalBlockFileSystem(int fd) {
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0) return false;
  switch (static_cast<uint64_t>(fs.f_type)) {
    case 0xEF53:      // ext2/3/4
    case 0x58465342:  // XFS
    case 0x9123683E:  // Btrfs
      return true;
    default:
      return false;
  }
}

// Has the page cache read the file again, so that readahead into the MADV_HUGEPAGE mapping at `base` makes 2
// MiB folios of it: this process's pages of it unmapped, dirty ones written back, the clean ones dropped (a
// page another process maps stays), then the probe again. A file just written or copied (4 KiB folios until
// evicted) costs one read from disk instead of a copy into fresh anonymous memory at every load.
bool ReadAgainInHugeFolios(int fd, uint8_t* base, size_t size) {
  if (::madvise(base, size, MADV_DONTNEED) != 0 || ::fdatasync(fd) != 0 ||
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) {
    return false;
  }
  return MappedInHugePages(base, size);
}

}  // namespace

StatusOr<std::unique_ptr<TensorFile>> TensorFile::Open(const std::string& path, WeightLoading loading) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound("no such file: " + path);
    return NotFound("cannot open " + path + ": " + std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return DataLoss(path + ": not a regular file");
  }
  std::unique_ptr<TensorFile> file(new TensorFile(path, fd, static_cast<uint64_t>(st.st_size), loading));
  if (loading != WeightLoading::kRead && file->size_ > 0) {
    const size_t size = static_cast<size_t>(file->size_);
    // Shared and read-only, as llama.cpp maps a model: the pages are the page cache's own. Starting on a
    // 2 MiB boundary, so that 2 MiB folios of the page cache can be mapped as huge pages.
    void* reserved = MapAligned2MiB(size, PROT_NONE);
    if (reserved != nullptr) {
      void* p = ::mmap(reserved, size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
      if (p == MAP_FAILED) {
        ::munmap(reserved, size);
      } else {
        ::madvise(p, size, MADV_HUGEPAGE);
        file->mapping_ =
            std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [size](uint8_t* q) { ::munmap(q, size); });
      }
    }
  }
  return file;
}

TensorFile::~TensorFile() { ::close(fd_); }  // the mapping lives on in any view still held

bool TensorFile::UsesMapping() const {
  std::call_once(decided_, [&] {
    uses_mapping_ = mapping_ != nullptr;
    if (!uses_mapping_ || loading_ != WeightLoading::kAuto || size_ < 2 * HugePageArena::kPageBytes ||
        !HugePageArena::Available()) {
      return;
    }
    uint8_t* base = mapping_.get();
    const size_t size = static_cast<size_t>(size_);
    if (MappedInHugePages(base, size)) return;
    if (OnLocalBlockFileSystem(fd_) && ReadAgainInHugeFolios(fd_, base, size)) {
      LOG(INFO) << path_ << ": the page cache held it in 4 KiB pages; read again from disk into 2 MiB ones";
      return;
    }
    uses_mapping_ = false;
    mapping_.reset();  // no view was handed out yet
    LOG(INFO) << path_ << ": the page cache holds (some of) it in 4 KiB pages, so its weights are read into "
              << "2 MiB pages (--mmap maps them anyway)";
  });
  return uses_mapping_;
}

Status TensorFile::ReadAt(uint64_t offset, void* out, uint64_t n, const std::string& what) const {
  uint8_t* dst = static_cast<uint8_t*>(out);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, dst + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return DataLoss(path_ + ": reading " + what + " at byte " + std::to_string(offset + done) + ": " +
                      std::strerror(errno));
    }
    if (got == 0) return Truncated(offset, offset + done, n, what);
    done += static_cast<uint64_t>(got);
  }
  return OkStatus();
}

Status TensorFile::Truncated(uint64_t offset, uint64_t end, uint64_t n, const std::string& what) const {
  struct stat st;
  const std::string now = ::fstat(fd_, &st) == 0 ? std::to_string(st.st_size) : std::string("?");
  return DataLoss(path_ + ": " + what + ": the file ends at byte " + std::to_string(end) + ", before the " +
                  std::to_string(n) + " bytes at offset " + std::to_string(offset) + " (it is " + now + " bytes now, " +
                  std::to_string(size_) + " when opened: truncated while open?)");
}

Status TensorFile::Populate(uint64_t offset, uint64_t n, const std::string& what) const {
  if (n == 0) return OkStatus();
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = offset / page * page;
  uint8_t* first = mapping_.get() + begin;
  const size_t len = static_cast<size_t>(offset + n - begin);
  int err = 0;
  do {
    err = ::madvise(first, len, MADV_POPULATE_READ) == 0 ? 0 : errno;
  } while (err == EINTR || err == EAGAIN);
  if (err == 0) return OkStatus();
  // EFAULT: a page lies past the file's end now (reading it would raise SIGBUS). Otherwise (EINVAL: a
  // kernel before 5.14) check the size, then fault each page in by reading it.
  struct stat st {};
  const bool ends_before = ::fstat(fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) < offset + n;
  if (err == EFAULT || ends_before) {
    return Truncated(offset, ends_before ? static_cast<uint64_t>(st.st_size) : offset + n, n, what);
  }
  volatile uint8_t sink = 0;
  for (uint64_t at = begin; at < offset + n; at += page) sink = sink + mapping_.get()[at];
  return OkStatus();
}

StatusOr<HostTensor> TensorFile::ReadSlice(const TensorInfo& info, int64_t row_begin, int64_t row_end,
                                           int64_t col_begin, int64_t col_end) const {
  if (info.shape.size() > 2) return InvalidArgument(info.name + " has more than 2 dimensions");
  const int64_t rows = info.rows();
  const int64_t cols = info.cols();
  if (row_begin < 0 || row_begin > row_end || row_end > rows || col_begin < 0 || col_begin > col_end ||
      col_end > cols) {
    return InvalidArgument(info.name + ": slice rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
                           ") cols [" + std::to_string(col_begin) + ", " + std::to_string(col_end) +
                           ") outside the tensor of " + std::to_string(rows) + " x " + std::to_string(cols));
  }
  const int64_t block = DTypeBlockElems(info.type);
  if (col_begin % block != 0 || col_end % block != 0) {
    return InvalidArgument(info.name + ": column bounds must be multiples of " + std::to_string(block) + " for " +
                           DTypeName(info.type));
  }
  const uint64_t src_row_bytes = static_cast<uint64_t>(DTypeRowBytes(info.type, cols));
  const uint64_t src = info.offset + static_cast<uint64_t>(row_begin) * src_row_bytes +
                       static_cast<uint64_t>(DTypeRowBytes(info.type, col_begin));
  const std::string what = "tensor " + info.name;
  const bool whole_rows = col_begin == 0 && col_end == cols;
  if (whole_rows && UsesMapping() && row_begin < row_end &&
      reinterpret_cast<uintptr_t>(mapping_.get() + src) % kViewAlignment == 0) {
    HostTensor view;
    view.type = info.type;
    view.rows = row_end - row_begin;
    view.cols = cols;
    const uint64_t n = static_cast<uint64_t>(view.nbytes());
    if (src + n > size_) return Truncated(src, size_, n, what);
    RETURN_IF_ERROR(Populate(src, n, what));
    view.data = std::shared_ptr<uint8_t>(mapping_, mapping_.get() + src);  // shares the mapping's lifetime
    return view;
  }
  HostTensor out;
  out.type = info.type;
  out.rows = row_end - row_begin;
  out.cols = col_end - col_begin;
  out.data = arena_.Allocate(static_cast<size_t>(out.nbytes()));
  if (whole_rows) {
    RETURN_IF_ERROR(ReadAt(src, out.data.get(), static_cast<uint64_t>(out.nbytes()), what));
    return out;
  }
  const uint64_t dst_row_bytes = static_cast<uint64_t>(out.row_bytes());
  for (int64_t r = 0; r < out.rows; ++r) {
    RETURN_IF_ERROR(ReadAt(src + static_cast<uint64_t>(r) * src_row_bytes,
                           out.data.get() + static_cast<uint64_t>(r) * dst_row_bytes, dst_row_bytes, what));
  }
  return out;
}

}  // namespace tpserve
