// CapturedLog: routes spdlog's default logger to a string at debug level for
// the lifetime of the object (one test), then puts the previous logger back.
// Thread-safety: the sink locks; read text() once the logging threads are
// done. Test-only.
#ifndef PDC_TESTS_TESTING_CAPTURED_LOG_H_
#define PDC_TESTS_TESTING_CAPTURED_LOG_H_

#include <memory>
#include <sstream>
#include <string>

#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace pdc::testing {

class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    auto logger = std::make_shared<spdlog::logger>("test", sink);
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_CAPTURED_LOG_H_
