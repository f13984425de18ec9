int LaunchK(float* p, int n);
