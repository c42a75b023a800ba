/* test_error.c — loom_errorf formats and returns its code. */
#include <string.h>

#include "test.h"
#include "util/error.h"

int main(void)
{
    loom_error e = {0};
    int rc = loom_errorf(&e, LOOM_E_FORMAT, "key '%s': expected %s, found %s", "a.b", "UINT32", "STRING");
    CHECK(rc == LOOM_E_FORMAT, "rc %d", rc);
    CHECK(e.code == LOOM_E_FORMAT, "code %d", e.code);
    CHECK(!strcmp(e.msg, "key 'a.b': expected UINT32, found STRING"), "msg '%s'", e.msg);
    CHECK(loom_errorf(NULL, LOOM_E_IO, "x") == LOOM_E_IO, "NULL err");
    return test_finish();
}
