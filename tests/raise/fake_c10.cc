// fake_c10.cc - a stand-in for PyTorch's libc10.so with the one function
// gpuarena looks for in it (lib/raise.c): c10::detail::torchCheckFail,
// which throws.  Built by raise-frameworks.sh, never installed.
#include <cstdint>
#include <stdexcept>

namespace c10 {
namespace detail {
[[noreturn]] void torchCheckFail(const char *func, const char *file, uint32_t line,
                                 const char *msg);
[[noreturn]] void torchCheckFail(const char *func, const char *file, uint32_t line,
                                 const char *msg)
{
    (void)func, (void)file, (void)line;
    throw std::runtime_error(msg);
}
} // namespace detail
} // namespace c10
