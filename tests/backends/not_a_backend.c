/* not_a_backend.c — a shared object named like a backend that exports no
 * alice_backend_entry (test_loader.c checks it is refused clearly). */
__attribute__((visibility("default"))) int alice_not_a_backend_answer(void)
{
	return 42;
}
