// SHA-256 digests of control-plane data (the loaded config's hash in /config_dump). Any thread.
#pragma once

#include <string>
#include <string_view>

namespace meshgate::ctl {

// The SHA-256 of `data` as 64 lowercase hex digits (OpenSSL EVP).
std::string sha256_hex(std::string_view data);

}  // namespace meshgate::ctl
