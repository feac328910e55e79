// lp_core/argv_mask.h: the rule that masks secrets in a command line before it is written to a
// worker file (meta.argv), the one implementation for the Python profiler (_core.mask_argv) and
// the standalone C++ profiler.
//
// Other users of a shared file system may read worker files, so a value that looks like a secret
// is replaced by "<masked>". A key names a secret when one of its words (split at anything but
// letters and digits, and between a lower-case letter and an upper-case one; compared in lower
// case) is a secret word:
//   - starts with "passw" (password, passwd), or is pass, passphrase, passcode, passkey or pw;
//   - starts with "secret";
//   - ends with "token" (token, hftoken, accesstoken), but not tokens, tokenizer, max_tokens;
//   - ends with "key" (key, apikey, wandbkey), but not keys, keyframes, keyword, keypoints;
//   - starts with "auth" (auth, authorization, authtoken), but not author or authors;
//   - starts with "credential", or is creds.
// The forms masked: "--KEY VALUE" (the next argument, unless it starts with "-" or the option is
// a negation "--no-..."), "--KEY=VALUE" and "KEY=VALUE" (after the "="), the short password flag
// "-p VALUE" and "-pVALUE", and the password of a URL's user info anywhere in an argument
// ("postgres://user:pw@host" -> "postgres://user:<masked>@host"). Known false positives, kept
// because the rule errs on the safe side: --pad-token-id, --sort-key, ssh's -p PORT, and a
// single-dash option starting with -p (-port, read as -pPASSWORD).
#pragma once

#include <string>
#include <vector>

namespace lp {

/// What a masked value is replaced by.
inline constexpr const char* kMasked = "<masked>";

/// Whether an option or variable name (leading dashes allowed) names a secret (see above).
bool names_a_secret(const std::string& key);

/// argv with every secret value replaced by kMasked (see above).
std::vector<std::string> masked_argv(const std::vector<std::string>& argv);

}  // namespace lp
