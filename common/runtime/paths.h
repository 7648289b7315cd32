// Output paths checked before the first step: a run that cannot write its --save or --trace
// file should say so in the first second, not after hours of training.
//
// What "writable output path" means here: the folder that will hold the file exists, is a
// folder, and this process may create files in it (access(2) with W_OK | X_OK; a read-only file
// system fails it even for root); and the path itself is absent or a regular file (a symbolic
// link is followed). Anything else (a folder, a FIFO, a device, a socket) is refused by name: the
// writers replace the file by rename(2), which would swap a device node or FIFO for a plain file,
// and a FIFO would block the writer.
//
// Glossary: parent = the folder part of the path ("." for a bare file name).
#pragma once

#include <string>

namespace llmp {

/// "" when `path` is absent or a regular file (after following symbolic links); otherwise what
/// it is: "a directory", "a FIFO", "a character device", "a block device", "a socket", or
/// "not a regular file". Never throws.
std::string non_regular_kind(const std::string& path);

/// The folder that holds `path`: "/x" for "/x/y", "." for "y". Trailing slashes are kept off.
std::string parent_directory(const std::string& path);

/// The first reason `path` cannot be written as an output file, as one line without "error: "
/// and starting with the flag, or "" when it can (or when `path` is empty: the flag is unset):
///   "--save /x/y: directory /x does not exist"
///   "--save /etc/passwd/y: /etc/passwd is not a directory"
///   "--trace /sys/t.json: directory /sys is not writable (Read-only file system)"
///   "--save /dev/null: it is a character device, not a regular file"
///   "--save out/: names a directory (ends with /), not a file"
/// Checks only; creates nothing.
std::string output_path_error(const std::string& flag, const std::string& path);

}  // namespace llmp
