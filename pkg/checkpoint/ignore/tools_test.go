package ignore

import ()
