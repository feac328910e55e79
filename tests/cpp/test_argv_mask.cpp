// tests/cpp/test_argv_mask.cpp: lp_core's argv masking rule (Python's tests/unit/test_argv_mask.py
// runs the same implementation through _core) and the mode of the directories make_dirs creates.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "lp_core/argv_mask.h"
#include "lp_core/worker_dir.h"

using Args = std::vector<std::string>;

TEST_CASE("secret values are masked in every form, by the words of the key") {
  const std::string m = lp::kMasked;
  CHECK(lp::masked_argv({"p", "--api-key", "s", "--token=t", "HF_TOKEN=x"}) ==
        Args{"p", "--api-key", m, "--token=" + m, "HF_TOKEN=" + m});
  CHECK(lp::masked_argv({"p", "-p", "hunter2", "-pglued", "--passphrase", "x"}) ==
        Args{"p", "-p", m, "-p" + m, "--passphrase", m});
  CHECK(lp::masked_argv({"p", "--auth", "u:pw", "--credentials", "c", "--apiKey", "k"}) ==
        Args{"p", "--auth", m, "--credentials", m, "--apiKey", m});
  CHECK(lp::masked_argv({"p", "postgres://u:pw@h/db", "--db=mysql://r:x@h:1/d"}) ==
        Args{"p", "postgres://u:" + m + "@h/db", "--db=mysql://r:" + m + "@h:1/d"});
}

TEST_CASE("innocent arguments are kept") {
  Args kept = {"p",
               "--max-tokens",
               "100",
               "--tokenizer",
               "t",
               "--keyframes",
               "3",
               "--num-passes",
               "2",
               "--author",
               "me",
               "lr=3",
               "https://u@h/x",
               "--no-password",
               "x.py"};
  CHECK(lp::masked_argv(kept) == kept);
  CHECK(lp::masked_argv({"p", "--api-key", "--verbose"}) == Args{"p", "--api-key", "--verbose"});
  CHECK_FALSE(lp::names_a_secret("--max_new_tokens"));
  CHECK(lp::names_a_secret("--client-secret"));
}

TEST_CASE("make_dirs creates no group- or world-writable directory under umask 000") {
  char tmpl[] = "/tmp/lp_argv_mask_XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  std::string root = tmpl;
  mode_t old = umask(0);
  int err = lp::make_dirs(root + "/a/b");
  umask(old);
  REQUIRE(err == 0);
  for (const std::string& d : {root + "/a", root + "/a/b"}) {
    struct stat st;
    REQUIRE(stat(d.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == lp::kRunDirMode);
  }
  rmdir((root + "/a/b").c_str());
  rmdir((root + "/a").c_str());
  rmdir(root.c_str());
}
