// Corpus: a byte-level text corpus, split once and deterministically into train and validation.
//
// Every byte is a token (vocabulary V = 256), so there is no tokenizer to build or ship: the
// model learns to spell. The default corpus is Debian's `fortunes` package (about 2.6 MB of
// quotations under /usr/share/games/fortunes), which a ~1M-parameter model starts to imitate
// within a few hundred steps.
//
// Only regular files are read: `path` must be a regular file or a folder (symlinks to either are
// followed), and anything else (/dev/zero, a FIFO, a socket) is refused by name before a byte is
// read, since reading it would never end or never start.
//
// Loading a folder walks it recursively in sorted path order and concatenates every regular
// file, skipping symlinks (Debian's `*.u8` links point back at the same files), `.dat` files
// (strfile's binary index) and `.u8` files. Sorting makes the byte stream, and so every batch,
// identical on every machine.
//
// Split: the first 90% of the bytes (floor) are the training split, the last 10% validation.
// A contiguous split, not a shuffled one, so that no validation window overlaps a training one
// except at the single boundary.
//
// Glossary: T sequence length (tokens per training example); a sequence needs T+1 bytes
// (T inputs and T targets shifted by one). V = 256 vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmp {

/// Where Debian's `fortunes` package installs its quotation files.
inline constexpr const char* kDefaultCorpusPath = "/usr/share/games/fortunes";

/// Which split of the corpus a batch is drawn from.
enum class SplitKind { kTrain, kVal };

/// "train" or "val".
const char* to_string(SplitKind s);

class Corpus {
 public:
  /// Byte-level vocabulary: every byte value 0..255 is a token.
  static constexpr int kVocab = 256;
  /// Fraction of the bytes (the leading part) that form the training split.
  static constexpr double kTrainFraction = 0.9;

  /// One contiguous split of the corpus. tokens are bytes (0..255).
  struct Split {
    SplitKind kind = SplitKind::kTrain;
    std::vector<uint8_t> bytes;
    int64_t size() const { return static_cast<int64_t>(bytes.size()); }
  };

  /// Loads `path` (a file, or a folder read recursively; see the file comment for what is
  /// skipped) and splits it 90/10. `T` is the sequence length the corpus will be sampled with.
  /// Throws std::runtime_error with one line naming the path when the path does not exist, is
  /// neither a regular file nor a folder ("corpus /dev/zero: not a regular file or directory (a
  /// character device)"), holds no bytes, or either split is shorter than T+1 bytes;
  /// std::invalid_argument when T < 1.
  static Corpus load(const std::string& path, int T);

  const Split& train() const { return train_; }
  const Split& val() const { return val_; }
  const Split& split(SplitKind s) const { return s == SplitKind::kTrain ? train_ : val_; }

  /// Total bytes (train + val).
  int64_t size() const { return train_.size() + val_.size(); }
  /// The files read, in the order they were concatenated.
  const std::vector<std::string>& files() const { return files_; }
  const std::string& path() const { return path_; }

  /// "" when `path` is a regular file or a folder (following symlinks), else what it is instead:
  /// "not a regular file or directory (a character device)", "... (a FIFO)", "... (a socket)",
  /// "... (a block device)"; "no such file or folder" when it does not exist.
  static std::string kind_error(const std::string& path);

 private:
  std::string path_;
  std::vector<std::string> files_;
  Split train_, val_;
};

}  // namespace llmp
