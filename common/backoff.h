// Exponential backoff for retry loops (pdc-node's reconciler, pdc-extender's
// reflectors): start at `initial`, double, stop at `max`; and jitter, so
// that many clients that failed together do not retry together.
// Thread-safety: pure functions; Jittered uses a thread-local generator.
#ifndef PDC_COMMON_BACKOFF_H_
#define PDC_COMMON_BACKOFF_H_

#include "absl/time/time.h"

namespace pdc {

// The wait after `current` (zero or negative: the first wait, `initial`).
absl::Duration NextBackoff(absl::Duration current, absl::Duration initial, absl::Duration max);

// Uniform in [d, d * (1 + factor)): client-go's wait.Jitter.
absl::Duration Jittered(absl::Duration d, double factor);

}  // namespace pdc

#endif  // PDC_COMMON_BACKOFF_H_
