// lp_core/argv_mask.cpp: which command-line values are secrets, masked before a worker file.
#include "lp_core/argv_mask.h"

#include <cctype>
#include <cstring>

namespace lp {

namespace {

bool starts_with(const std::string& s, const char* prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool is_alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

bool is_secret_word(const std::string& w) {
  if (starts_with(w, "passw") || w == "pass" || w == "passphrase" || w == "passcode" ||
      w == "passkey" || w == "pw") {
    return true;
  }
  if (starts_with(w, "secret") || ends_with(w, "token") || ends_with(w, "key")) return true;
  if (starts_with(w, "auth") && w != "author" && w != "authors") return true;
  return starts_with(w, "credential") || w == "creds";
}

// The key's words, lower case: split at non-alphanumerics and at a lower-to-upper case change.
std::vector<std::string> words_of(const std::string& key) {
  std::vector<std::string> out;
  std::string word;
  for (size_t i = 0; i < key.size(); ++i) {
    char c = key[i];
    bool boundary = !is_alnum(c) || (i > 0 && std::isupper(static_cast<unsigned char>(c)) &&
                                     std::islower(static_cast<unsigned char>(key[i - 1])));
    if (boundary && !word.empty()) {
      out.push_back(word);
      word.clear();
    }
    if (is_alnum(c)) word.push_back(char(std::tolower(static_cast<unsigned char>(c))));
  }
  if (!word.empty()) out.push_back(word);
  return out;
}

// A name that can be a variable or option name: letters, digits, '_', '-', '.' (no '/', ':').
bool is_plain_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_alnum(c) && c != '_' && c != '-' && c != '.') return false;
  }
  return true;
}

// Masks the password of every "scheme://user:password@" in s.
std::string mask_url_passwords(const std::string& s) {
  std::string out;
  size_t from = 0;
  for (size_t at = s.find("://"); at != std::string::npos; at = s.find("://", at + 3)) {
    size_t start = at + 3;
    size_t end = start;  // the authority: up to the next '/', '?', '#' or space
    while (end < s.size() && std::strchr("/?# ", s[end]) == nullptr) ++end;
    size_t arobase = s.rfind('@', end == 0 ? 0 : end - 1);
    if (start < from || arobase == std::string::npos || arobase < start) continue;
    size_t colon = s.find(':', start);
    if (colon == std::string::npos || colon > arobase) continue;
    out.append(s, from, colon + 1 - from);
    out.append(kMasked);
    from = arobase;
  }
  out.append(s, from, std::string::npos);
  return out;
}

// "--KEY" or "KEY" before an "=": a plain name (not a path or a URL) that names a secret.
bool names_a_secret_key(const std::string& key) {
  size_t start = key.find_first_not_of('-');
  return start != std::string::npos && start <= 2 && is_plain_name(key.substr(start)) &&
         names_a_secret(key);
}

}  // namespace

bool names_a_secret(const std::string& key) {
  for (const std::string& w : words_of(key)) {
    if (is_secret_word(w)) return true;
  }
  return false;
}

std::vector<std::string> masked_argv(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  out.reserve(argv.size());
  bool mask_next = false;
  for (const std::string& arg : argv) {
    bool takes_value = arg.size() > 1 && arg[0] == '-';
    if (mask_next && !takes_value) {
      out.push_back(kMasked);
      mask_next = false;
      continue;
    }
    mask_next = false;
    size_t eq = arg.find('=');
    if (arg == "-p") {
      mask_next = true;
      out.push_back(arg);
    } else if (starts_with(arg, "-p") && !starts_with(arg, "--")) {
      out.push_back(std::string("-p") + kMasked);  // mysql's -pPASSWORD
    } else if (takes_value && eq == std::string::npos) {
      std::vector<std::string> words = words_of(arg);
      mask_next = names_a_secret(arg) && !(words.size() > 1 && words[0] == "no");
      out.push_back(mask_url_passwords(arg));
    } else if (eq != std::string::npos && names_a_secret_key(arg.substr(0, eq))) {
      out.push_back(arg.substr(0, eq + 1) + kMasked);  // --KEY=VALUE, KEY=VALUE
    } else {
      out.push_back(mask_url_passwords(arg));
    }
  }
  return out;
}

}  // namespace lp
