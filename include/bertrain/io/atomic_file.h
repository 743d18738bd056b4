// atomic_file.h: the one atomic text writer of the project. Checkpoints, configs, predictions and results all
// go through it, so a crash or a full disk never leaves half a file where a whole one was (DESIGN.md section 4).
#pragma once

#include <string>
#include <string_view>

namespace bertrain {

/// Writes `text` to `path` atomically: the bytes go to "<path>.tmp.<pid>" in the same directory, which is
/// fsynced, renamed over `path` (replacing any previous file in one step) and the directory fsynced, so after a
/// crash `path` holds either the old or the new text, never a mix. The directory must exist.
/// Throws bertrain::Error naming `path` when the temporary file cannot be created or written, or the rename
/// fails; the temporary file is removed and any previous `path` is left untouched.
void write_text_atomic(const std::string& path, std::string_view text);

}  // namespace bertrain
