#include "cli/guard.hpp"

#include <iostream>

#include "api/api.hpp"
#include "api/errors.hpp"

namespace bmpipe::cli {

int guarded(const std::string& command, const std::function<int()>& body) {
  auto fail = [&](const std::exception& e) {
    std::cerr << "bmpipe " << command << ": " << e.what() << "\n";
    return 2;
  };
  try {
    return body();
  } catch (const ScheduleFileError& e) {
    std::cerr << e.what() << "\n";  // "FILE:ROW:COLUMN: message"
    return 2;
  } catch (const api::RequestError& e) {
    return fail(e);
  } catch (const api::NoPlanFits& e) {
    return fail(e);
  } catch (const api::OutputError& e) {
    return fail(e);
  } catch (const ConfigError& e) {
    return fail(e);
  }
}

}  // namespace bmpipe::cli
