#include "model/tensor_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tpserve {

StatusOr<std::unique_ptr<TensorFile>> TensorFile::Open(const std::string& path) {
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
  return std::unique_ptr<TensorFile>(new TensorFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

TensorFile::~TensorFile() { ::close(fd_); }

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
    if (got == 0) {
      struct stat st;
      const std::string now = ::fstat(fd_, &st) == 0 ? std::to_string(st.st_size) : std::string("?");
      return DataLoss(path_ + ": " + what + ": the file ends at byte " + std::to_string(offset + done) +
                      ", before the " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                      " (it is " + now + " bytes now, " + std::to_string(size_) +
                      " when opened: truncated while open?)");
    }
    done += static_cast<uint64_t>(got);
  }
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
  HostTensor out = HostTensor::Allocate(info.type, row_end - row_begin, col_end - col_begin);
  const uint64_t src_row_bytes = static_cast<uint64_t>(DTypeRowBytes(info.type, cols));
  const uint64_t src = info.offset + static_cast<uint64_t>(row_begin) * src_row_bytes +
                       static_cast<uint64_t>(DTypeRowBytes(info.type, col_begin));
  const std::string what = "tensor " + info.name;
  if (col_begin == 0 && col_end == cols) {
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
