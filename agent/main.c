#include <stdio.h>

#include "version.h"

int main(void)
{
	printf("dstack-healthd v%s (%s)\n", HEALTHD_VERSION, HEALTHD_REV);
	return 0;
}
