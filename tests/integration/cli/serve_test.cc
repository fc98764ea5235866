// `shardrt serve`'s refusals: bad flags, a model file it cannot read and an address it cannot
// bind are one line on stderr and exit 1. (What it serves is tested through the official
// OpenAI client by tests/model/test_serve.py.)
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cli/cli_runner.h"
#include "gtest/gtest.h"

namespace shardrt::cli {
namespace {

using testing::ExpectCleanError;

TEST(ServeTest, BadFlagsFilesAndAddressesAreOneLine) {
  ExpectCleanError("serve --model m.gguf --port 70000", "--port");
  ExpectCleanError("serve --model m.gguf --max-batch 0", "--max-batch");
  ExpectCleanError("serve --model m.gguf --max-body-bytes 10", "--max-body-bytes");
  ExpectCleanError("serve --model m.gguf extra", "unexpected argument 'extra'");
  ExpectCleanError("serve --model /nonexistent/model.gguf --port 0 --devices 1",
                   "/nonexistent/model.gguf");
  // A port another socket holds.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string port = std::to_string(ntohs(address.sin_port));
  if (std::filesystem::exists(SHARDRT_MODEL_PATH)) {  // the file is read before the port
    ExpectCleanError(std::string("serve --model ") + SHARDRT_MODEL_PATH + " --devices 1 --port " +
                         port,
                     "cannot listen on 127.0.0.1:" + port);
  }
  close(fd);
}

}  // namespace
}  // namespace shardrt::cli
